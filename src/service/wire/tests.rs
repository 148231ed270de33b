use super::*;
use aiscp_engine::digest::Algorithm;
use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
use std::os::fd::AsFd;

fn pair() -> (OwnedFd, OwnedFd) {
    socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .unwrap()
}

#[test]
fn a_digest_crosses_whole_and_a_wrong_length_is_refused() {
    for algorithm in Algorithm::ALL {
        let digest = algorithm.of_bytes(b"some bytes");
        let wire = WireDigest::from(&digest);
        let text = serde_json::to_string(&wire).unwrap();
        let back: WireDigest = serde_json::from_str(&text).unwrap();
        assert_eq!(back.digest(), Some(digest));
        let short = WireDigest {
            bytes: vec![1, 2, 3],
            ..wire
        };
        assert_eq!(short.digest(), None);
    }
}

#[test]
fn a_copy_request_crosses_with_its_descriptors() {
    let (a, b) = pair();
    let f = std::fs::File::open("Cargo.toml").unwrap();
    let file = |id, src_name: &[u8]| FileRequest {
        id,
        src_name: src_name.to_vec(),
        dst_name: "d/caf\u{e9}".into(),
        sparse: Sparse::Always,
        handover: Handover::InFlight {
            len: 5,
            truncate: true,
        },
        sums: Some(Sums::Crc32c),
    };
    // A name that is not UTF-8 crosses as bytes, one that is as text.
    let req = Request::Copy {
        files: vec![file(7, b"caf\xe9"), file(8, b"x")],
    };
    let fd = f.as_raw_fd();
    send(a.as_fd(), &req, &[fd, fd, fd, fd]).unwrap();
    let mut inbox = Inbox::default();
    let (got, fds): (Request, _) = inbox.receive(b.as_fd()).unwrap();
    assert_eq!(got, req);
    assert_eq!(fds.len(), 4);
    let text = serde_json::to_string(&got).unwrap();
    assert!(text.contains(r#""src_name":[99,97,102,233]"#), "{text}");
    assert!(text.contains("\"dst_name\":\"d/caf\u{e9}\""), "{text}");
    assert!(inbox.receive_now::<Request>(b.as_fd()).unwrap().is_none());
}

#[test]
fn garbage_is_an_error_not_a_panic() {
    let (a, b) = pair();
    for junk in [
        &b"\xff\x00{"[..],
        b"{\"type\":\"copy\"}",
        b"[]",
        b"{\"type\":\"hello\",\"protocol\":1,\"version\":\"x\",\"more\":1}",
    ] {
        socket::send(a.as_raw_fd(), junk, MsgFlags::empty()).unwrap();
        let got = receive::<Request>(b.as_fd());
        assert!(matches!(got, Err(WireError::Malformed(_))), "{junk:?}");
    }
    drop(a);
    assert!(matches!(
        receive::<Request>(b.as_fd()),
        Err(WireError::Closed)
    ));
}

#[test]
fn stage_times_round_trip() {
    let t = StageTimes {
        read: Duration::from_millis(1500),
        ..StageTimes::default()
    };
    assert_eq!(StageTimes::from(Stages::from(&t)), t);
    let odd = Stages {
        open: -1.0,
        read: f64::NAN,
        ..Stages::default()
    };
    assert_eq!(StageTimes::from(odd), StageTimes::default());
}
