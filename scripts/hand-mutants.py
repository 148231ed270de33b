#!/usr/bin/env python3
"""Hand-made mutants of the guards that keep data and the staging service safe, each with
the tests that must kill it: every mutant is applied alone (one exact text replacement),
its tests run, and the file restored. A mutant whose tests pass is a guard no test pins.

cargo-mutants (scripts/mutants.sh) finds mutants by rule; these are the bugs a reviewer
would write on purpose (a check dropped, a flag ignored), kept so that the next pass starts
from them.

    scripts/hand-mutants.py [--list] [NAME...]

Needs what the suites need (root for setpriv and mount; the fake GPU library is built by
the tests). Prints one line per mutant: killed or SURVIVED, and the tests it ran.
"""

import argparse
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

# name, file, text, replacement, test filters (`cargo test --test it -- FILTERS`)
MUTANTS = [
    (
        "a-stopped-bounce-writes-its-slice",
        "crates/engine/src/bounce.rs",
        "        // No write begins once the copy is stopped.\n        cx.check_cancel().map_err(|e| (written, e))?;\n",
        "        // No write begins once the copy is stopped.\n",
        ["service::after_client::a_client_killed_mid_tree_has_no_file_in_flight_written_after"],
    ),
    (
        "the-library-flies-large-files",
        "crates/engine/src/engine/mod.rs",
        "        self.library_in_turn().is_none() && self.queue_max().is_some()",
        "        self.queue_max().is_some()",
        ["service::routes::a_large_file_stays_on_the_library_while_another_client_is_busy"],
    ),
    (
        "auto-flies-nothing-on-the-library",
        "crates/engine/src/backend/request.rs",
        "    (library_route && chosen).then_some(LIBRARY_FROM)",
        "    None",
        [
            "engine_route::auto_on_hipfile_flies",
            "service::routes::a_service_on_hipfile_flies_files_under_a_mebibyte",
        ],
    ),
    (
        "library-from-taken-as-a-maximum",
        "crates/engine/src/engine/mod.rs",
        "            Some(staging) => staging.bounce_below().map(|b| chunk.min(b - 1)),",
        "            Some(staging) => staging.bounce_below().map(|b| chunk.min(b)),",
        ["engine_route::auto_on_hipfile_flies"],
    ),
    (
        "library-asked-for-flies-too",
        "crates/engine/src/backend/request.rs",
        "    let chosen = request.route == RouteChoice::Auto && !request.async_io;",
        "    let chosen = !request.async_io;",
        ["engine_route::auto_on_hipfile_flies", "engine_paths::"],
    ),
    (
        "a-turn-alone-never-gives-way",
        "src/service/server/scheduler.rs",
        "            true => (u64::MAX, Some(&give_way_now as GiveWay<'_>)),",
        "            true => (u64::MAX, None),",
        [
            "service::clients::a_file_alone_in_turn_is_one_part_that_gives_way",
            "service::clients::a_long_file_in_turn_does_not_hold_another_clients_small_one",
        ],
    ),
    (
        "a-turn-alone-ignores-the-stop",
        "src/service/server/scheduler.rs",
        "        let give_way_now = || self.shared.files_waiting() || stop.load(Ordering::SeqCst);",
        "        let give_way_now = || self.shared.files_waiting();",
        ["service::clients::a_stop_signal_ends_a_file_alone_in_turn_at_its_next_slice"],
    ),
    (
        "a-part-that-gave-way-skips-the-rest",
        "crates/engine/src/worker.rs",
        "                let upto = self.good.unwrap_or(part.start);",
        "                let upto = part.end;",
        ["service::clients::a_file_alone_in_turn_is_one_part_that_gives_way"],
    ),
    (
        "a-turn-alone-is-cut-in-parts",
        "src/service/server/scheduler.rs",
        "            true => (u64::MAX, Some(&give_way_now as GiveWay<'_>)),",
        "            true => (self.turn_part, Some(&give_way_now as GiveWay<'_>)),",
        ["service::clients::a_file_alone_in_turn_is_one_part_that_gives_way"],
    ),
    (
        "pinned-windows-never-fall-back",
        "crates/hipfile-rs/src/buffer.rs",
        "                Err(refusal) => {",
        "                Err(refusal) => { return Err(refusal);",
        ["faults::setup::pinned_windows_fall_back_where_registration_is_refused"],
    ),
    (
        "a-torn-read-keeps-its-zeros",
        "crates/engine/src/fileio.rs",
        "    if below == n || !asked[below..n].contains(&0) {",
        "    if true || below == n || !asked[below..n].contains(&0) {",
        ["source_changes::a_read_torn_by_a_truncate_ends_at_the_cut"],
    ),
    (
        "a-direct-read-is-never-torn",
        "crates/engine/src/fileio.rs",
        "                let kept = untorn(file, &mut buf[done..end], n, offset + done as u64)?;",
        "                let kept = if direct { n } else { untorn(file, &mut buf[done..end], n, offset + done as u64)? };",
        ["source_changes::a_read_torn_by_a_truncate_ends_at_the_cut"],
    ),
    (
        "an-emptied-file-keeps-a-torn-read",
        "crates/engine/src/fileio.rs",
        "    if below == n || !asked[below..n].contains(&0) {",
        "    if size == 0 || below == n || !asked[below..n].contains(&0) {",
        ["source_changes::a_read_torn_then_emptied_keeps_none_of_its_zeros"],
    ),
    (
        "a-file-that-says-less-than-it-holds-is-cut",
        "crates/engine/src/fileio.rs",
        "            Ok(n) => return Ok(n),",
        "            Ok(n) => return Ok(n.min(below)),",
        ["source_changes::a_proc_file_of_size_zero_is_copied_as_read"],
    ),
    (
        "a-failed-backend-start-leaves-directories-unfinished",
        "src/cp/copy/file.rs",
        "                    self.backend_failed = true;",
        "                    crate::sys::messages::exit(1);",
        ["flags::a_backend_that_cannot_start_ends_the_run_with_its_directories_finished"],
    ),
    (
        "a-failed-backend-start-lets-the-walk-go-on",
        "src/cp/copy/walk.rs",
        "                || self.backend_failed",
        "                || false",
        ["flags::a_backend_that_cannot_start_ends_the_run_with_its_directories_finished"],
    ),
    (
        "a-failed-backend-start-lets-later-operands-go-on",
        "src/main.rs",
        "        if signals.cancelled() || copier.backend_failed {",
        "        if signals.cancelled() {",
        ["flags::a_backend_that_cannot_start_ends_the_run_with_its_directories_finished"],
    ),
    (
        "walk-sorts-a-directory-backwards",
        "src/cp/copy/walk.rs",
        "            entries.sort_by_key(|&(ino, _)| ino);",
        "            entries.sort_by_key(|&(ino, _)| std::cmp::Reverse(ino));",
        ["fuzz_vs_cp", "parity::host::directory_verbose", "parity::host::in_flight_tree"],
    ),
    (
        "walk-assumes-three-open-descriptors",
        "src/cp/copy/walk.rs",
        "    let spare = limit.saturating_sub(open + OTHER_DESCRIPTORS);",
        "    let spare = limit.saturating_sub(3 + OTHER_DESCRIPTORS + 0 * open);",
        ["trees::a_deep_tree_copies_beside_inherited_descriptors"],
    ),
    (
        "update-reads-a-dest-still-in-flight",
        "src/cp/copy/entry.rs",
        "            if opts.update_older && self.inflight.writing.contains_key(&dm.id()) {",
        "            if false && opts.update_older && self.inflight.writing.contains_key(&dm.id()) {",
        ["parity::host::update_hard_linked_dests"],
    ),
    (
        "stop-keeps-the-directories-made-after-its-point",
        "src/cp/copy/inflight.rs",
        "                        .for_each(|d| d.remove());",
        "                        .for_each(drop);",
        ["signals::tree::a_stop_removes_the_directories_made_after_its_point"],
    ),
    (
        "unwritable-directory-finished-before-its-files",
        "src/cp/copy/walk.rs",
        "        if unwritable || self.config.cancel.load(Ordering::SeqCst) {",
        "        if false && (unwritable || self.config.cancel.load(Ordering::SeqCst)) {",
        ["signals::tree::a_stop_in_a_read_only_directory_leaves_no_file_unnamed"],
    ),
    (
        "slot-looks-at-the-stop-after-the-file-began",
        "crates/engine/src/one_slot.rs",
        "        // out and DEST as it was. The first window looks.\n",
        "        // out and DEST as it was. The first window looks.\n        cx.check_cancel()?;\n",
        ["signals::tree::a_file_named_at_a_stop_is_never_left_with_its_old_bytes"],
    ),
    (
        "owner-stop-ignored",
        "crates/engine/src/bounce.rs",
        "!(self.on_stop == OnStop::Leave && self.cancel.load(Ordering::SeqCst))",
        "true",
        ["service::after_client::"],
    ),
    (
        "second-sigint-kills-while-service-writes",
        "src/sys/signals.rs",
        "stopping.load(Ordering::SeqCst) && !SERVICE_WRITING.load(Ordering::SeqCst)",
        "stopping.load(Ordering::SeqCst)",
        ["service::after_client::a_second_sigint"],
    ),
    (
        "reader-gone-without-cancel",
        "src/service/server/connections.rs",
        """        self.cancel.store(true, Ordering::SeqCst);
        let _ = self.events.send(Event::Gone(self.id));""",
        "        let _ = self.events.send(Event::Gone(self.id));",
        ["service::after_client::a_client_killed"],
    ),
    (
        "truncated-descriptors-accepted",
        "src/service/wire.rs",
        "if got.contains(ReturnFlags::CTRUNC) {",
        "if false {",
        ["service::hostile::messages_with_too_many_descriptors"],
    ),
    (
        "claimed-length-trusted",
        "src/service/server/connections.rs",
        "len: Some(len.min(held)),",
        "len: Some(len),",
        ["service::hostile::a_claimed_length"],
    ),
    (
        "plan-not-windowed",
        "crates/engine/src/file_copy.rs",
        "let span = chunk.saturating_mul(WINDOW_SLICES);",
        "let span = u64::MAX;",
        ["full_disk::the_largest_sparse_file"],
    ),
    (
        "client-trusts-any-socket-directory",
        "src/service/mod.rs",
        "if !meta.is_dir() || !owner_ok || meta.mode() & 0o022 != 0 {",
        "if !meta.is_dir() {",
        ["service::hostile::a_socket_directory"],
    ),
    (
        "stuck-service-waited-on",
        "src/data/service_client/lost.rs",
        "if late(self.pinged_at, ANSWER_LIMIT) {",
        "if false {",
        ["service::hostile::a_stopped_service"],
    ),
    (
        "file-in-turn-holds-the-scheduler",
        "src/service/server/scheduler.rs",
        "            None => self.turns.push_back(turn),",
        """            None => {
                self.turns.push_front(turn);
                return self.step_turn();
            }""",
        ["service::clients::a_long_file_in_turn"],
    ),
    (
        "auto-service-keeps-client-descriptors",
        "src/data/service_client/reach.rs",
        "                keep_only_standard_streams();\n",
        "",
        ["service::clients::auto_starts_a_detached"],
    ),
    (
        "auto-waits-on-an-exited-service",
        "src/data/service_client/reach.rs",
        "return dial(path).map_err(|_| Some(start_failure(path, status)));",
        "let _ = status;",
        ["service::clients::auto_with_a_service_that_cannot_start"],
    ),
    (
        "service-reads-peer-gid",
        "src/service/server/connections.rs",
        "let peer_uid = match crate::service::peer(&conn) {",
        "let peer_uid = match crate::service::peer(&conn).map(|(p, _)| (p, "
        "nix::sys::socket::getsockopt(&conn, nix::sys::socket::sockopt::PeerCredentials)"
        ".map_or(0, |c| c.gid()))) {",
        ["service::users::peer_credentials"],
    ),
    (
        "client-reads-peer-gid",
        "src/data/service_client/reach.rs",
        "let (_, uid) = crate::service::peer(sock).map_err(|e| e.to_string())?;",
        "let uid = nix::sys::socket::getsockopt(sock, "
        "nix::sys::socket::sockopt::PeerCredentials).map_or(0, |c| c.gid());",
        ["service::users::peer_credentials"],
    ),
    (
        "service-takes-any-descriptor",
        "src/service/server/connections.rs",
        "if st.st_mode & libc::S_IFMT != libc::S_IFREG {",
        "if false {",
        ["service::hostile::malformed_copy_requests"],
    ),
    (
        "service-skips-the-descriptor-count",
        "src/service/server/connections.rs",
        " || fds.len() != 2 * files.len()",
        "",
        ["service::hostile::malformed_copy_requests"],
    ),
    (
        "idle-exit-with-a-client-connected",
        "src/service/server/scheduler.rs",
        "if !self.clients.is_empty() || self.engine.in_flight() > 0 || !self.turns.is_empty() {",
        "if self.engine.in_flight() > 0 || !self.turns.is_empty() {",
        ["service::clients::idle_exit_waits"],
    ),
    (
        "idle-time-counted-from-the-start",
        "src/service/server/scheduler.rs",
        "                idle_since = Instant::now();\n            } else if",
        "            } else if",
        ["service::clients::idle_exit_waits"],
    ),
    (
        "auto-service-without-idle-exit",
        "src/data/service_client/reach.rs",
        '            .arg(format!("--idle-exit={}s", AUTO_IDLE_EXIT.as_secs()))\n',
        "",
        ["service::clients::auto_starts_a_detached"],
    ),
    (
        "service-takes-another-uids-socket-directory",
        "src/service/mod.rs",
        "if !meta.is_dir() || meta.uid() != uid || !fits {",
        "if !meta.is_dir() || !fits {",
        ["service::users::a_socket_directory_not"],
    ),
    (
        "unanswered-files-unbounded",
        "src/service/server/connections.rs",
        "if unanswered.load(Ordering::SeqCst) + files.len() > MAX_PENDING =>",
        "if false =>",
        ["service::hostile::more_than_128_unanswered"],
    ),
    (
        "unanswered-bound-one-short",
        "src/service/server/connections.rs",
        "if unanswered.load(Ordering::SeqCst) + files.len() > MAX_PENDING =>",
        "if unanswered.load(Ordering::SeqCst) + files.len() >= MAX_PENDING =>",
        ["service::hostile::more_than_128_unanswered"],
    ),
    (
        "hole-trusted-on-one-look",
        "crates/engine/src/file_copy/finish.rs",
        "Ok((again == NextData::None && self.look()? == first).then_some(first.size))",
        "Ok((again == NextData::None).then_some(first.size))",
        ["source_changes::a_sparse_source_cut_between_the_looks"],
    ),
    (
        "shared-socket-directory-others-may-write",
        "src/service/mod.rs",
        "meta.mode() & 0o022 == 0 && meta.mode() & 0o001 != 0,",
        "meta.mode() & 0o001 != 0,",
        ["service::users::a_shared_service_needs"],
    ),
    (
        "progress-lines-show-bytes-since-the-last",
        "src/progress/mod.rs",
        "Snapshot::take(c, rate).log_line()",
        "Snapshot { bytes_done: (rate.unwrap_or(0.0) * secs) as u64, ..Snapshot::take(c, rate) }"
        ".log_line()",
        ["progress::progress_off_a_terminal"],
    ),
    (
        "read-back-ignores-a-signal",
        "crates/engine/src/verify/mod.rs",
        "        if stop.load(Ordering::SeqCst) {",
        "        if false {",
        ["verify::a_signal_during_the_read_back"],
    ),
    (
        "silent-connection-kept",
        "src/service/server/connections.rs",
        "    timeout(Some(HELLO_TIMEOUT)).ok()?;",
        "    timeout(None).ok()?;",
        ["service::wire::garbage_on_the_socket"],
    ),
    (
        "walk-retired-as-files-end",
        "src/cp/copy/inflight.rs",
        "order.push_front(Item::Line(ticket, held));\n                            return finished_one;",
        # The file not ended yet, with its line, goes behind the next file: retired as
        # the files end rather than in cp's order.
        "let file = order.pop_front().unwrap();\n"
        "                            let at = order.iter().position(|i| matches!(i, Item::File(_)))"
        ".map_or(order.len(), |i| i + 1);\n"
        "                            order.insert(at, file);\n"
        "                            order.insert(at, Item::Line(ticket, held));\n"
        "                            return finished_one;",
        ["walk_order::many_small_files_are_named"],
    ),
    (
        "walk-v-lines-not-held",
        "src/sys/messages.rs",
        "    if holding() {\n        return hold_back(Held::Stdout(",
        "    if false {\n        return hold_back(Held::Stdout(",
        ["walk_order::errors_in_a_tree"],
    ),
    (
        "walk-errors-not-held",
        "src/sys/messages.rs",
        "fn to_stderr(text: &str, counts: bool) -> bool {\n    if holding() {",
        "fn to_stderr(text: &str, counts: bool) -> bool {\n    if false {",
        ["walk_order::errors_in_a_tree"],
    ),
    (
        "walk-prompt-while-files-fly",
        "src/cp/copy/entry.rs",
        "                Clobbering::Ask => {\n                    self.settle();\n",
        "                Clobbering::Ask => {\n",
        ["walk_order::prompts_come_in_cps_order"],
    ),
    (
        "walk-link-map-lost-between-flights",
        "src/cp/copy/inflight.rs",
        "        self.remember_in_flight(ticket, pending);\n",
        "        self.remember_in_flight(ticket, pending);\n        self.memory.links.clear();\n",
        ["walk_order::hard_link_groups"],
    ),
    (
        "walk-stop-names-unbegun-files",
        "src/cp/copy/inflight.rs",
        "Some(f) if !never_began(f) => messages::release(held),",
        "Some(_) => messages::release(held),",
        ["walk_order::a_sigint_at_random_points"],
    ),
    (
        "walk-stop-keeps-unbegun-dests",
        "src/cp/copy/pending.rs",
        "if self.created && ours {",
        "if false && self.created && ours {",
        ["walk_order::a_sigint_at_random_points"],
    ),
    (
        "walk-stop-lets-held-lines-out",
        "src/cp/copy/inflight.rs",
        "Some(Item::Said(held)) => {\n                    if !self.inflight.cut_off {",
        "Some(Item::Said(held)) => {\n                    if true {",
        ["walk_order::a_sigint_at_random_points"],
    ),
]


def run(mutant):
    name, path, text, replacement, filters = mutant
    file = ROOT / path
    original = file.read_text()
    count = original.count(text)
    if count != 1:
        return f"{name}: NOT APPLIED ({path} has the text {count} times: update the list)"
    file.write_text(original.replace(text, replacement))
    try:
        done = subprocess.run(
            ["cargo", "test", "-q", "--test", "it", "--", *filters],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
    finally:
        file.write_text(original)
    verdict = "killed" if done.returncode != 0 else "SURVIVED"
    return f"{name}: {verdict} ({' '.join(filters)})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("names", nargs="*", help="only these mutants")
    args = parser.parse_args()
    chosen = [m for m in MUTANTS if not args.names or m[0] in args.names]
    if args.list:
        for m in chosen:
            print(f"{m[0]}: {m[1]} -> {' '.join(m[4])}")
        return 0
    survived = 0
    for mutant in chosen:
        line = run(mutant)
        survived += ": killed (" not in line
        print(line, flush=True)
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
