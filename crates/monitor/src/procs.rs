//! The processes the monitor may act on: its own descendants only.
//!
//! KubeVirt's monitor looks for any process whose `/proc/<pid>/cmdline`
//! contains `qemu-system` (else `qemu-kvm`): in a pod it is PID 1 and sees
//! only the pod's processes. Outside a pod (a test machine, several VMs on
//! one host) that search would find another VM's QEMU, so here a process
//! qualifies only when it descends from the monitor (its parent chain,
//! `/proc/<pid>/stat` field 4, reaches the monitor's pid). The monitor is a
//! child subreaper, so a QEMU orphaned by a dead launcher is re-parented to
//! it and still qualifies; in a pod, where the monitor is PID 1, every
//! process does, as in KubeVirt.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::Read;
use std::path::Path;

/// How much of a command line is read: the program name comes first, and
/// QEMU's whole command line is a few KiB.
const MAX_CMDLINE: u64 = 64 * 1024;

/// One process, as read from `/proc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proc {
    /// Its pid.
    pub pid: i32,
    /// Its parent's pid (0 for a namespace's PID 1).
    pub ppid: i32,
    /// State `Z`: exited, not yet reaped (its command line reads empty).
    pub zombie: bool,
    /// `/proc/<pid>/cmdline`, NUL-separated, at most 64 KiB.
    pub cmdline: Vec<u8>,
}

/// Parses `/proc/<pid>/stat`: (ppid, zombie). The command field may hold
/// any byte, `)` included, so the fields are read after its last `)`.
pub fn parse_stat(stat: &str) -> Option<(i32, bool)> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut it = rest.split_whitespace();
    let state = it.next()?;
    let ppid = it.next()?.parse().ok()?;
    Some((ppid, state == "Z"))
}

/// Reads every process under `proc_root` (normally `/proc`). Processes that
/// vanish while being read are left out.
pub fn read_table(proc_root: &Path) -> Vec<Proc> {
    let Ok(dir) = fs::read_dir(proc_root) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let base = proc_root.join(pid.to_string());
        let Some((ppid, zombie)) = fs::read_to_string(base.join("stat"))
            .ok()
            .and_then(|s| parse_stat(&s))
        else {
            continue;
        };
        let mut cmdline = Vec::new();
        if let Ok(f) = fs::File::open(base.join("cmdline")) {
            // A read error leaves what was read; the process may be gone.
            let _ = f.take(MAX_CMDLINE).read_to_end(&mut cmdline);
        }
        out.push(Proc {
            pid,
            ppid,
            zombie,
            cmdline,
        });
    }
    out.sort_by_key(|p| p.pid);
    out
}

/// The pids in `table` that descend from `root` (not `root` itself).
pub fn descendants(table: &[Proc], root: i32) -> HashSet<i32> {
    let parent: HashMap<i32, i32> = table.iter().map(|p| (p.pid, p.ppid)).collect();
    let mut out = HashSet::new();
    for p in table {
        // Bounded walk: a parent chain is never longer than the table.
        let mut cur = p.ppid;
        for _ in 0..=table.len() {
            if cur == root {
                out.insert(p.pid);
                break;
            }
            match parent.get(&cur) {
                Some(&next) if next != cur => cur = next,
                _ => break,
            }
        }
    }
    out
}

/// The first live descendant of `root` whose command line contains `needle`
/// (KubeVirt's `findPid`, limited to descendants).
pub fn find_descendant(table: &[Proc], root: i32, needle: &str) -> Option<i32> {
    let mine = descendants(table, root);
    table
        .iter()
        .filter(|p| !p.zombie && mine.contains(&p.pid))
        .find(|p| contains(&p.cmdline, needle.as_bytes()))
        .map(|p| p.pid)
}

/// The live descendants of `root`.
pub fn live_descendants(table: &[Proc], root: i32) -> Vec<i32> {
    let mine = descendants(table, root);
    table
        .iter()
        .filter(|p| !p.zombie && mine.contains(&p.pid))
        .map(|p| p.pid)
        .collect()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: i32, ppid: i32, cmd: &str) -> Proc {
        Proc {
            pid,
            ppid,
            zombie: false,
            cmdline: cmd.replace(' ', "\0").into_bytes(),
        }
    }

    #[test]
    fn stat_with_odd_command_names() {
        assert_eq!(parse_stat("42 (qemu) x) S 7 42 42 0 -1"), Some((7, false)));
        assert_eq!(parse_stat("43 (a) Z 1 0"), Some((1, true)));
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S notanumber"), None);
    }

    #[test]
    fn only_descendants_qualify() {
        let table = vec![
            p(1, 0, "/sbin/init"),
            p(10, 1, "/usr/bin/virt-launcher-monitor"),
            p(11, 10, "/usr/bin/virt-launcher --uid a"),
            p(12, 11, "/usr/sbin/libvirtd"),
            // another VM's QEMU, not ours
            p(20, 1, "/usr/bin/qemu-system-x86_64 -name guest=other"),
            // ours, re-parented to the monitor after the launcher died
            p(30, 10, "/usr/bin/qemu-system-x86_64 -name guest=mine"),
        ];
        assert_eq!(find_descendant(&table, 10, "qemu-system"), Some(30));
        assert_eq!(find_descendant(&table, 10, "qemu-kvm"), None);
        let mut d: Vec<i32> = descendants(&table, 10).into_iter().collect();
        d.sort_unstable();
        assert_eq!(d, vec![11, 12, 30]);
        // As PID 1 (in a pod), everything is a descendant.
        assert_eq!(find_descendant(&table, 1, "qemu-system"), Some(20));
    }

    #[test]
    fn zombies_and_cycles() {
        let mut z = p(5, 2, "qemu-system-x86_64");
        z.zombie = true;
        let table = vec![p(2, 1, "monitor"), z, p(7, 8, "a"), p(8, 7, "b")];
        assert_eq!(find_descendant(&table, 2, "qemu-system"), None);
        assert!(live_descendants(&table, 2).is_empty());
        // A parent cycle (impossible in /proc, but bounded anyway).
        assert!(descendants(&table, 99).is_empty());
    }

    #[test]
    fn reads_this_process() {
        let table = read_table(Path::new("/proc"));
        let me = i32::try_from(std::process::id()).expect("pid fits");
        let mine = table.iter().find(|p| p.pid == me).expect("self listed");
        assert!(!mine.zombie);
        assert!(!mine.cmdline.is_empty());
    }
}
