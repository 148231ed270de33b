//! Which GPU is nearest a file's storage (`--gpu auto`).
//!
//! GPUDirect Storage practice pairs each drive with the GPU under the same PCIe switch, or
//! at least the same root complex or NUMA node: DMA between them stays off the inter-socket
//! link. Both places come from sysfs: a file's block device is `/sys/dev/block/MAJ:MIN`,
//! whose real path runs through the PCI devices above it
//! (`/sys/devices/pci0000:40/0000:40:01.1/0000:43:00.0/nvme/nvme0/nvme0n1`); a GPU's is
//! `/sys/bus/pci/devices/BUS_ID` for the bus id the runtime reports. The more leading
//! components two paths share, the nearer they are; the NUMA node breaks ties.

use crate::backend::{gpu::GpuStaging, GpuChoice};
use crate::job::DataJob;
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Files over several GPUs: consecutive files start on different GPUs (a one-slice file
/// uses only its first), and with `--gpu auto` each file keeps to the GPU(s) nearest its
/// storage.
pub(crate) struct Spread {
    /// Each position's GPU index.
    indices: Vec<u32>,
    /// `--gpu auto`: the machine's PCI layout.
    topology: Option<Topology>,
    /// Why a file not placed by locality uses every GPU, for --debug.
    asked: String,
    files: usize,
}

impl Spread {
    /// None with one GPU: nothing to spread.
    pub(crate) fn new(choice: &GpuChoice, staging: &GpuStaging) -> Option<Spread> {
        let indices = staging.indices();
        if indices.len() < 2 {
            return None;
        }
        let list: Vec<String> = indices.iter().map(u32::to_string).collect();
        Some(Spread {
            topology: (*choice == GpuChoice::Auto)
                .then(|| Topology::new(&sysfs_root(), staging.bus_ids())),
            asked: match choice {
                GpuChoice::List(_) => format!("--gpu {}", list.join(",")),
                _ => "--gpu all".to_owned(),
            },
            indices,
            files: 0,
        })
    }

    pub(crate) fn gpus(&self) -> usize {
        self.indices.len()
    }

    /// The GPUs (positions) for the next file, `job`, its first one first, and why.
    pub(crate) fn place(&mut self, job: &DataJob<'_>) -> (Vec<usize>, String) {
        let (mut set, why) = self.nearest(job.src, job.dst);
        // Rotate so that consecutive files start on different GPUs.
        let start = self.files % self.indices.len();
        self.files += 1;
        let k = set.iter().position(|&d| d >= start).unwrap_or(0);
        set.rotate_left(k);
        (set, why)
    }

    /// The GPUs (positions, ascending) for a file from `src` to `dst`, and why: under
    /// `--gpu auto` those nearest their storage where that is known, else every one.
    pub(crate) fn nearest(&mut self, src: &File, dst: &File) -> (Vec<usize>, String) {
        let mut set: Vec<usize> = (0..self.indices.len()).collect();
        let mut why = self.asked.clone();
        if let Some(topology) = &mut self.topology {
            let dev = |f: &File| f.metadata().map_or(0, |m| m.dev());
            let choice = topology.nearest(dev(src), dev(dst));
            set.clone_from(&choice.devices);
            why.clone_from(&choice.why);
        }
        (set, why)
    }

    /// "GPU 1" / "GPUs 0,2" for positions `used`.
    pub(crate) fn describe(&self, used: &[usize]) -> String {
        let list: Vec<String> = used.iter().map(|&d| self.indices[d].to_string()).collect();
        let s = if used.len() == 1 { "" } else { "s" };
        format!("GPU{s} {}", list.join(","))
    }
}

/// Where a device sits: its PCI path under `/sys/devices` (the root complex `pciDDDD:BB`,
/// then each PCI address down to the device) and its NUMA node, when known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    pub chain: Vec<String>,
    pub numa: Option<i32>,
}

/// The GPUs one file uses, and why, for `--debug`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    /// Positions in the run's device list, ascending; never empty.
    pub devices: Vec<usize>,
    pub why: String,
}

/// The run's GPUs and what has been worked out for each pair of (SRC, DST) filesystems.
pub struct Topology {
    root: PathBuf,
    gpus: Vec<Option<Place>>,
    known: HashMap<(u64, u64), Choice>,
}

/// The sysfs to read: `/sys`, or the tree a test builds (`AISCP_TEST_SYSFS`, inert unless
/// set) to stand for a machine with drives and GPUs where it wants them.
pub fn sysfs_root() -> PathBuf {
    std::env::var_os("AISCP_TEST_SYSFS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/sys"))
}

impl Topology {
    /// `bus_ids[i]` is the PCI address of the run's i-th GPU (None where the runtime could
    /// not say).
    pub fn new(root: &Path, bus_ids: &[Option<String>]) -> Topology {
        let gpus = bus_ids
            .iter()
            .map(|id| {
                let dev = root.join("bus/pci/devices").join(id.as_deref()?);
                place_of(root, &dev)
            })
            .collect();
        Topology {
            root: root.to_owned(),
            gpus,
            known: HashMap::new(),
        }
    }

    /// The GPUs for a copy from a file on device `src_dev` (st_dev) to one on `dst_dev`.
    pub fn nearest(&mut self, src_dev: u64, dst_dev: u64) -> &Choice {
        let Topology { root, gpus, known } = self;
        known
            .entry((src_dev, dst_dev))
            .or_insert_with(|| choose(root, gpus, src_dev, dst_dev))
    }
}

fn choose(root: &Path, gpus: &[Option<Place>], src_dev: u64, dst_dev: u64) -> Choice {
    let all = |why: String| Choice {
        devices: (0..gpus.len()).collect(),
        why,
    };
    if gpus.iter().all(Option::is_none) {
        return all("no GPU's PCI place is known".to_owned());
    }
    let sides: Vec<(String, Result<Place, String>)> = [src_dev, dst_dev]
        .iter()
        .enumerate()
        .filter(|&(i, dev)| i == 0 || *dev != src_dev)
        .map(|(_, &dev)| block_place(root, dev))
        .collect();
    let scores: Vec<u32> = gpus
        .iter()
        .map(|gpu| {
            let Some(gpu) = gpu else { return 0 };
            sides
                .iter()
                .filter_map(|(_, p)| p.as_ref().ok())
                .map(|p| score(p, gpu))
                .sum()
        })
        .collect();
    let best = scores.iter().copied().max().unwrap_or(0);
    let near: Vec<usize> = (0..gpus.len()).filter(|&i| scores[i] == best).collect();
    let unknown: Vec<String> = sides
        .iter()
        .filter_map(|(name, p)| p.as_ref().err().map(|why| format!("{name}: {why}")))
        .collect();
    if best == 0 || near.len() == gpus.len() {
        let why = if !unknown.is_empty() {
            format!("storage locality unknown ({})", unknown.join("; "))
        } else {
            let names: Vec<&str> = sides.iter().map(|(n, _)| n.as_str()).collect();
            format!("no GPU is nearer {} than another", names.join(" and "))
        };
        return all(why);
    }
    let gpu = gpus[near[0]].as_ref().expect("scored above zero");
    let why: Vec<String> = sides
        .iter()
        .filter_map(|(name, p)| Some((name, p.as_ref().ok()?)))
        .filter_map(|(name, p)| relation(p, gpu).map(|r| format!("{r} {name}")))
        .collect();
    Choice {
        devices: near,
        why: format!("nearest: {}", why.join("; ")),
    }
}

/// Shared leading PCI components count two each (a shared switch beats a shared root
/// complex), the same NUMA node one.
fn score(disk: &Place, gpu: &Place) -> u32 {
    let shared = common(disk, gpu) as u32;
    let numa = matches!((disk.numa, gpu.numa), (Some(a), Some(b)) if a == b);
    shared * 2 + u32::from(numa)
}

fn common(a: &Place, b: &Place) -> usize {
    a.chain
        .iter()
        .zip(&b.chain)
        .take_while(|(x, y)| x == y)
        .count()
}

/// How `gpu` relates to `disk`, in words; None when it does not.
fn relation(disk: &Place, gpu: &Place) -> Option<String> {
    match common(disk, gpu) {
        0 => match (disk.numa, gpu.numa) {
            (Some(a), Some(b)) if a == b => Some(format!("same NUMA node {a} as")),
            _ => None,
        },
        1 => Some(format!("same PCI root {} as", disk.chain[0])),
        n => Some(format!("under PCI bridge {} with", disk.chain[n - 1])),
    }
}

/// The block device behind `dev` (st_dev) by name, and its place or why there is none.
fn block_place(root: &Path, dev: u64) -> (String, Result<Place, String>) {
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let link = root.join(format!("dev/block/{major}:{minor}"));
    let Ok(path) = std::fs::canonicalize(&link) else {
        return (
            format!("device {major}:{minor}"),
            Err("no block device".to_owned()),
        );
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if let Some(place) = place_of(root, &path) {
        return (name, Ok(place));
    }
    // A device-mapper or md device: the place of the first device under it that has one.
    let slaves = std::fs::read_dir(path.join("slaves"))
        .into_iter()
        .flatten()
        .flatten();
    for slave in slaves {
        if let Some(place) = std::fs::canonicalize(slave.path())
            .ok()
            .and_then(|p| place_of(root, &p))
        {
            return (name, Ok(place));
        }
    }
    (name, Err("not on a PCI device".to_owned()))
}

/// The place of the sysfs device at `dev` (resolved): the PCI components of its real path,
/// and the NUMA node of the deepest one. None when it has no PCI component.
fn place_of(root: &Path, dev: &Path) -> Option<Place> {
    let devices = std::fs::canonicalize(root.join("devices")).ok()?;
    let real = std::fs::canonicalize(dev).ok()?;
    let rel = real.strip_prefix(&devices).ok()?;
    let mut chain = Vec::new();
    let mut deepest = devices.clone();
    let mut walked = devices;
    for part in rel.components() {
        let part = part.as_os_str().to_string_lossy();
        walked.push(&*part);
        let is_root = chain.is_empty() && part.starts_with("pci");
        if is_root || (!chain.is_empty() && is_pci_address(&part)) {
            chain.push(part.into_owned());
            deepest = walked.clone();
        } else if !chain.is_empty() {
            break;
        }
    }
    if chain.len() < 2 {
        return None;
    }
    let numa = std::fs::read_to_string(deepest.join("numa_node"))
        .ok()
        .and_then(|t| t.trim().parse::<i32>().ok())
        .filter(|&n| n >= 0);
    Some(Place { chain, numa })
}

/// "DDDD:BB:DD.F" in hex.
fn is_pci_address(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && s.split([':', '.'])
            .all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A sysfs with two root complexes: NVMe drives under 0000:00:01.0 and 0000:40:01.1,
    /// GPUs beside each, a drive on node 1 under its own root, a dm device over the second
    /// drive, and a virtual device.
    fn machine() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        let mk = |rel: &str, numa: Option<i32>| {
            let d = r.join("devices").join(rel);
            std::fs::create_dir_all(&d).unwrap();
            if let Some(n) = numa {
                std::fs::write(d.join("numa_node"), format!("{n}\n")).unwrap();
            }
        };
        mk("pci0000:00/0000:00:01.0/0000:02:00.0", Some(0));
        mk("pci0000:00/0000:00:01.0/0000:03:00.0", Some(0));
        mk("pci0000:00/0000:00:03.0/0000:05:00.0", Some(0));
        mk("pci0000:40/0000:40:01.1/0000:43:00.0", Some(1));
        mk("pci0000:40/0000:40:01.1/0000:44:00.0", Some(1));
        mk("pci0000:80/0000:80:01.0/0000:81:00.0", Some(1));
        mk(
            "pci0000:00/0000:00:01.0/0000:02:00.0/nvme/nvme0/nvme0n1/nvme0n1p1",
            None,
        );
        mk(
            "pci0000:40/0000:40:01.1/0000:44:00.0/nvme/nvme1/nvme1n1",
            None,
        );
        mk(
            "pci0000:80/0000:80:01.0/0000:81:00.0/nvme/nvme2/nvme2n1",
            None,
        );
        mk("virtual/block/dm-0/slaves", None);
        mk("virtual/block/zram0", None);
        std::fs::create_dir_all(r.join("dev/block")).unwrap();
        std::fs::create_dir_all(r.join("bus/pci/devices")).unwrap();
        for (majmin, target) in [
            (
                "259:1",
                "pci0000:00/0000:00:01.0/0000:02:00.0/nvme/nvme0/nvme0n1/nvme0n1p1",
            ),
            (
                "259:2",
                "pci0000:40/0000:40:01.1/0000:44:00.0/nvme/nvme1/nvme1n1",
            ),
            (
                "259:3",
                "pci0000:80/0000:80:01.0/0000:81:00.0/nvme/nvme2/nvme2n1",
            ),
            ("253:0", "virtual/block/dm-0"),
            ("252:0", "virtual/block/zram0"),
        ] {
            symlink(
                format!("../../devices/{target}"),
                r.join("dev/block").join(majmin),
            )
            .unwrap();
        }
        symlink(
            "../../../../pci0000:40/0000:40:01.1/0000:44:00.0/nvme/nvme1/nvme1n1",
            r.join("devices/virtual/block/dm-0/slaves/nvme1n1"),
        )
        .unwrap();
        for id in ["0000:03:00.0", "0000:05:00.0", "0000:43:00.0"] {
            let root = if id.starts_with("0000:4") {
                "pci0000:40/0000:40:01.1"
            } else if id == "0000:05:00.0" {
                "pci0000:00/0000:00:03.0"
            } else {
                "pci0000:00/0000:00:01.0"
            };
            symlink(
                format!("../../../devices/{root}/{id}"),
                r.join("bus/pci/devices").join(id),
            )
            .unwrap();
        }
        t
    }

    fn gpus() -> Vec<Option<String>> {
        ["0000:03:00.0", "0000:05:00.0", "0000:43:00.0"]
            .iter()
            .map(|s| Some(s.to_string()))
            .collect()
    }

    #[test]
    fn places_follow_the_pci_path() {
        let t = machine();
        let (name, place) = block_place(t.path(), libc::makedev(259, 1));
        assert_eq!(name, "nvme0n1p1");
        let place = place.unwrap();
        assert_eq!(place.chain, ["pci0000:00", "0000:00:01.0", "0000:02:00.0"]);
        assert_eq!(place.numa, Some(0));
        let (name, place) = block_place(t.path(), libc::makedev(252, 0));
        assert_eq!(
            (name.as_str(), place),
            ("zram0", Err("not on a PCI device".into()))
        );
        let (name, place) = block_place(t.path(), libc::makedev(0, 45));
        assert_eq!(
            (name.as_str(), place),
            ("device 0:45", Err("no block device".into()))
        );
        // dm-0 sits on nvme1n1.
        let (name, place) = block_place(t.path(), libc::makedev(253, 0));
        assert_eq!(name, "dm-0");
        assert_eq!(place.unwrap().chain[1], "0000:40:01.1");
    }

    #[test]
    fn the_gpu_under_the_same_switch_wins() {
        let t = machine();
        let mut topo = Topology::new(t.path(), &gpus());
        let nvme0 = libc::makedev(259, 1);
        let nvme1 = libc::makedev(259, 2);
        let c = topo.nearest(nvme0, nvme0).clone();
        assert_eq!(c.devices, [0]);
        assert_eq!(
            c.why,
            "nearest: under PCI bridge 0000:00:01.0 with nvme0n1p1"
        );
        let c = topo.nearest(nvme1, nvme1).clone();
        assert_eq!(c.devices, [2]);
        // Through the dm device too.
        let c = topo
            .nearest(libc::makedev(253, 0), libc::makedev(253, 0))
            .clone();
        assert_eq!(c.devices, [2], "{}", c.why);
        // From nvme0 to nvme1: GPU 0 and GPU 2 each share a switch with one side.
        let c = topo.nearest(nvme0, nvme1).clone();
        assert_eq!(c.devices, [0, 2], "{}", c.why);
    }

    #[test]
    fn numa_node_alone_still_counts_and_unknown_falls_back_to_all() {
        let t = machine();
        let mut topo = Topology::new(t.path(), &gpus());
        // nvme2 is under its own root on node 1, as is only GPU 2.
        let nvme2 = libc::makedev(259, 3);
        let c = topo.nearest(nvme2, nvme2).clone();
        assert_eq!(c.devices, [2]);
        assert_eq!(c.why, "nearest: same NUMA node 1 as nvme2n1");
        let zram = libc::makedev(252, 0);
        let c = topo.nearest(zram, zram).clone();
        assert_eq!(c.devices, [0, 1, 2]);
        assert_eq!(
            c.why,
            "storage locality unknown (zram0: not on a PCI device)"
        );
        // GPUs whose bus id the runtime did not give (or sysfs lacks): all of them.
        let mut blind = Topology::new(t.path(), &[None, Some("0000:99:00.0".into())]);
        let c = blind.nearest(libc::makedev(259, 1), libc::makedev(259, 1));
        assert_eq!(c.devices, [0, 1]);
        assert_eq!(c.why, "no GPU's PCI place is known");
    }

    #[test]
    fn pci_addresses() {
        assert!(is_pci_address("0000:43:00.0"));
        assert!(is_pci_address("0000:c4:1f.7"));
        assert!(!is_pci_address("pci0000:00"));
        assert!(!is_pci_address("0000:43:00:0"));
        assert!(!is_pci_address("nvme0n1p1234"));
    }
}
