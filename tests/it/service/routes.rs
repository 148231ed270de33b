//! The route `auto` chooses on hipFile, through the service: the service's engine flies the
//! small files of a client's tree as an in-process copy does, and gives the library the
//! large ones.

use super::Service;
use crate::engine_route::{assert_small_ones_flew, library_from_tree, AROUND_LIBRARY_FROM};
use crate::support::{assert_same_bytes, Backend};
use std::fs;

#[test]
fn a_service_on_hipfile_flies_files_under_a_mebibyte() {
    let d = tempfile::tempdir().unwrap();
    let svc = Service::start(Backend::FakeGpu, d.path(), &["--chunk-size", "4M"], &[]);
    let src = d.path().join("src");
    library_from_tree(&src);
    let out = svc
        .client()
        .arg("-r")
        .arg(&src)
        .arg(d.path().join("dst"))
        .output()
        .unwrap();
    assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
    for size in AROUND_LIBRARY_FROM {
        let name = format!("f{size}");
        let want = fs::read(src.join(&name)).unwrap();
        let got = fs::read(d.path().join("dst").join(&name)).unwrap();
        assert_same_bytes(&got, &want, &name);
    }
    let log = svc.log();
    assert!(log.contains("files under 1.00 MiB in flight"), "{log}");
    assert_small_ones_flew(&log);
    assert!(svc.stop().success());
}
