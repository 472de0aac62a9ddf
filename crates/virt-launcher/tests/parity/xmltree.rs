//! A small XML tree for comparing domain XML the way the references'
//! README says: parse, normalise the spellings it lists, then diff with
//! attributes as sets, repeated elements matched by identity and order
//! compared within each device kind.

use std::collections::BTreeMap;
use std::fmt;

use quick_xml::events::Event;
use quick_xml::Reader;

/// An element: name, attributes, trimmed text, children in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    pub attrs: BTreeMap<String, String>,
    pub text: String,
    pub children: Vec<Node>,
}

impl Node {
    fn new(name: String) -> Self {
        Node {
            name,
            attrs: BTreeMap::new(),
            text: String::new(),
            children: Vec::new(),
        }
    }

    /// Parses one XML document into its root element.
    pub fn parse(xml: &str) -> Result<Node, String> {
        let mut reader = Reader::from_str(xml);
        let mut stack: Vec<Node> = vec![Node::new(String::new())];
        loop {
            let ev = reader.read_event().map_err(|e| e.to_string())?;
            match ev {
                Event::Start(ref e) | Event::Empty(ref e) => {
                    let mut n = Node::new(String::from_utf8_lossy(e.name().as_ref()).into_owned());
                    for a in e.attributes() {
                        let a = a.map_err(|e| e.to_string())?;
                        let key = String::from_utf8_lossy(a.key.as_ref()).into_owned();
                        if key.starts_with("xmlns") {
                            continue;
                        }
                        let v = a.unescape_value().map_err(|e| e.to_string())?;
                        n.attrs.insert(key, v.into_owned());
                    }
                    if matches!(ev, Event::Start(_)) {
                        stack.push(n);
                    } else {
                        stack.last_mut().ok_or("unbalanced")?.children.push(n);
                    }
                }
                Event::End(_) => {
                    let mut n = stack.pop().ok_or("unbalanced")?;
                    n.text = n.text.trim().to_owned();
                    stack.last_mut().ok_or("unbalanced")?.children.push(n);
                }
                Event::Text(t) => {
                    let t = t.unescape().map_err(|e| e.to_string())?;
                    if let Some(top) = stack.last_mut() {
                        top.text.push_str(&t);
                    }
                }
                Event::CData(t) => {
                    if let Some(top) = stack.last_mut() {
                        top.text.push_str(&String::from_utf8_lossy(&t));
                    }
                }
                Event::Eof => break,
                _ => {}
            }
        }
        let mut root = stack.pop().ok_or("unbalanced")?;
        if !stack.is_empty() || root.children.len() != 1 {
            return Err("not one root element".into());
        }
        Ok(root.children.remove(0))
    }

    fn child(&self, name: &str) -> Option<&Node> {
        self.children.iter().find(|c| c.name == name)
    }

    fn is_empty(&self) -> bool {
        self.attrs.is_empty() && self.text.is_empty() && self.children.is_empty()
    }

    /// One line of the element, for messages.
    fn brief(&self) -> String {
        let attrs: Vec<String> = self
            .attrs
            .iter()
            .map(|(k, v)| format!("{k}='{v}'"))
            .collect();
        let inner: Vec<String> = self.children.iter().map(Node::brief).collect();
        format!(
            "<{}{}{}>{}{}",
            self.name,
            if attrs.is_empty() { "" } else { " " },
            attrs.join(" "),
            self.text,
            inner.join("")
        )
    }
}

/// Applies the equivalences the references' README lists (spellings that
/// need no change), to either side:
/// - `<metadata>` dropped (KubeVirt writes it after define);
/// - `<uuid>` dropped when it equals the sysinfo system `uuid` entry
///   (libvirt takes the domain UUID from there);
/// - empty sysinfo sections and entries, and empty `<source/>`, dropped;
/// - libvirt's defaults made explicit: CPU feature `policy='require'`,
///   hostdev `mode='subsystem'`, drive address `target='0'`; `<vcpu
///   current>` dropped when it equals the count, or, with `<vcpus>`, the
///   vCPUs enabled there (where libvirt takes it from);
/// - KubeVirt-internal `<capacity>` and `<filesystemOverhead>` of disks
///   dropped; `vram` of a virtio video model dropped (QEMU's virtio-gpu has
///   none); `discard` of CD-ROM drivers dropped (read-only media).
///
/// The README's last spelling, the explicit virtio-serial controller of a
/// headless VMI, needs no rule: the converter writes it as KubeVirt does,
/// only with the serial console.
pub fn normalise(mut dom: Node) -> Node {
    dom.children.retain(|c| c.name != "metadata");
    let sys_uuid = dom
        .child("sysinfo")
        .and_then(|s| s.child("system"))
        .and_then(|s| {
            s.children
                .iter()
                .find(|e| e.name == "entry" && e.attrs.get("name").is_some_and(|n| n == "uuid"))
        })
        .map(|e| e.text.clone());
    dom.children
        .retain(|c| !(c.name == "uuid" && Some(&c.text) == sys_uuid.as_ref()));
    // With <vcpus>, libvirt's current count is the enabled vCPUs.
    let enabled = dom.child("vcpus").map(|v| {
        v.children
            .iter()
            .filter(|c| c.attrs.get("enabled").is_some_and(|e| e == "yes"))
            .count()
            .to_string()
    });
    for c in &mut dom.children {
        if c.name == "sysinfo" {
            for section in &mut c.children {
                section
                    .children
                    .retain(|e| !(e.name == "entry" && e.text.is_empty()));
            }
            c.children
                .retain(|s| !s.children.is_empty() || !s.text.is_empty());
        }
        if c.name == "vcpu"
            && (c.attrs.get("current") == Some(&c.text)
                || (enabled.is_some() && c.attrs.get("current") == enabled.as_ref()))
        {
            c.attrs.remove("current");
        }
    }
    walk(&mut dom, "");
    dom
}

fn walk(n: &mut Node, parent: &str) {
    match (parent, n.name.as_str()) {
        ("cpu", "feature") => {
            n.attrs
                .entry("policy".into())
                .or_insert_with(|| "require".into());
        }
        (_, "hostdev") => {
            n.attrs
                .entry("mode".into())
                .or_insert_with(|| "subsystem".into());
        }
        (_, "address") if n.attrs.get("type").is_some_and(|t| t == "drive") => {
            n.attrs.entry("target".into()).or_insert_with(|| "0".into());
        }
        ("video", "model") if n.attrs.get("type").is_some_and(|t| t == "virtio") => {
            n.attrs.remove("vram");
        }
        _ => {}
    }
    if n.name == "disk" {
        n.children
            .retain(|c| c.name != "capacity" && c.name != "filesystemOverhead");
        if n.attrs.get("device").is_some_and(|d| d == "cdrom") {
            for c in n.children.iter_mut().filter(|c| c.name == "driver") {
                c.attrs.remove("discard");
            }
        }
    }
    n.children.retain(|c| !(c.name == "source" && c.is_empty()));
    let name = n.name.clone();
    for c in &mut n.children {
        walk(c, &name);
    }
}

/// One difference: where, and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diff {
    /// `/domain/devices/disk[alias=ua-a]/driver@discard`: elements by
    /// identity (or position), then `@attribute`, `#text` or `#order`.
    pub path: String,
    /// Ours against KubeVirt's.
    pub what: String,
}

impl fmt::Display for Diff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.what)
    }
}

/// What identifies an element among its siblings of the same name: its
/// alias; a controller's type and index; the `name` of an entry, feature
/// or timer; the id of a vCPU, I/O thread or NUMA cell; the vCPU or
/// thread a pin is for; else its target's device or name. `None`:
/// matched by position.
fn identity(n: &Node) -> Option<String> {
    let attr = |k: &str| n.attrs.get(k).cloned();
    if let Some(a) = n.child("alias").and_then(|a| a.attrs.get("name")) {
        return Some(format!("alias={a}"));
    }
    match n.name.as_str() {
        "controller" => {
            return Some(format!(
                "{}#{}",
                attr("type").unwrap_or_default(),
                attr("index").unwrap_or_default()
            ))
        }
        "entry" | "feature" | "timer" => return attr("name").map(|v| format!("name={v}")),
        "vcpu" | "iothread" | "cell" => {
            if let Some(id) = attr("id") {
                return Some(format!("id={id}"));
            }
        }
        "vcpupin" => return attr("vcpu").map(|v| format!("vcpu={v}")),
        "iothreadpin" => return attr("iothread").map(|v| format!("iothread={v}")),
        _ => {}
    }
    let target = n.child("target")?;
    target
        .attrs
        .get("dev")
        .map(|d| format!("dev={d}"))
        .or_else(|| target.attrs.get("name").map(|d| format!("name={d}")))
}

/// Keys of `children` named `name`: identity, or position; repeated
/// identities get `#2`, `#3`... appended.
fn keyed<'a>(children: &'a [Node], name: &str) -> Vec<(String, &'a Node)> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    children
        .iter()
        .filter(|c| c.name == name)
        .enumerate()
        .map(|(i, c)| {
            let key = identity(c).unwrap_or_else(|| i.to_string());
            let n = seen.entry(key.clone()).or_default();
            *n += 1;
            let key = if *n > 1 { format!("{key}#{n}") } else { key };
            (key, c)
        })
        .collect()
}

/// The differences of `ours` from `theirs` (KubeVirt's).
pub fn diff(ours: &Node, theirs: &Node) -> Vec<Diff> {
    let mut out = Vec::new();
    diff_into(ours, theirs, &format!("/{}", ours.name), &mut out);
    out
}

fn diff_into(a: &Node, b: &Node, path: &str, out: &mut Vec<Diff>) {
    let keys: std::collections::BTreeSet<&String> = a.attrs.keys().chain(b.attrs.keys()).collect();
    for k in keys {
        let (x, y) = (a.attrs.get(k), b.attrs.get(k));
        if x != y {
            out.push(Diff {
                path: format!("{path}@{k}"),
                what: format!("ours {x:?}, KubeVirt's {y:?}"),
            });
        }
    }
    if a.text != b.text {
        out.push(Diff {
            path: format!("{path}#text"),
            what: format!("ours {:?}, KubeVirt's {:?}", a.text, b.text),
        });
    }
    let mut names: Vec<&str> = Vec::new();
    for c in a.children.iter().chain(&b.children) {
        if !names.contains(&c.name.as_str()) {
            names.push(&c.name);
        }
    }
    for name in names {
        let ka = keyed(&a.children, name);
        let kb = keyed(&b.children, name);
        // An element alone of its name on both sides needs no key.
        let single = ka.len() <= 1 && kb.len() <= 1;
        let at = |key: &str| {
            if single && key == "0" {
                format!("{path}/{name}")
            } else {
                format!("{path}/{name}[{key}]")
            }
        };
        for (key, x) in &ka {
            let p = at(key);
            match kb.iter().find(|(k, _)| k == key) {
                Some((_, y)) => diff_into(x, y, &p, out),
                None => out.push(Diff {
                    path: p,
                    what: format!("only ours: {}", x.brief()),
                }),
            }
        }
        for (key, y) in &kb {
            if !ka.iter().any(|(k, _)| k == key) {
                out.push(Diff {
                    path: at(key),
                    what: format!("only KubeVirt's: {}", y.brief()),
                });
            }
        }
        // Within a device kind, order is guest-visible (PCI slots follow it).
        if path == "/domain/devices" {
            let common = |from: &[(String, &Node)], other: &[(String, &Node)]| -> Vec<String> {
                from.iter()
                    .filter(|(k, _)| other.iter().any(|(o, _)| o == k))
                    .map(|(k, _)| k.clone())
                    .collect()
            };
            let (oa, ob) = (common(&ka, &kb), common(&kb, &ka));
            if oa != ob {
                out.push(Diff {
                    path: format!("{path}/{name}#order"),
                    what: format!("ours {oa:?}, KubeVirt's {ob:?}"),
                });
            }
        }
    }
}
