//! Scratch tool: convert a VMI file for the host arch and print the XML.
#![allow(clippy::unwrap_used, clippy::disallowed_methods, missing_docs)]
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arch: api::Arch = args
        .get(2)
        .map(|a| a.parse().unwrap())
        .unwrap_or(api::Arch::Amd64);
    let virt = if args.get(3).map(String::as_str) == Some("qemu") {
        converter::VirtType::Qemu
    } else {
        converter::VirtType::Kvm
    };
    let mut v = api::load_vmi(&std::fs::read(&args[1]).unwrap(), arch).unwrap();
    api::defaults::fill_missing_uid(&mut v);
    let d = converter::convert(&v, &converter::ConvertContext::new(arch, virt)).unwrap();
    print!("{}", d.to_xml().unwrap());
}
