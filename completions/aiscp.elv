
use builtin;
use str;

set edit:completion:arg-completer[aiscp] = {|@words|
    fn spaces {|n|
        builtin:repeat $n ' ' | str:join ''
    }
    fn cand {|text desc|
        edit:complex-candidate $text &display=$text' '(spaces (- 14 (wcswidth $text)))$desc
    }
    var command = 'aiscp'
    for word $words[1..-1] {
        if (str:has-prefix $word '-') {
            break
        }
        set command = $command';'$word
    }
    var completions = [
        &'aiscp'= {
            cand --backup 'Make a backup of each existing destination file'
            cand --preserve 'Preserve the specified attributes (default: mode,ownership,timestamps), if possible additional attributes: context, links, xattr, all'
            cand --no-preserve 'Don''t preserve the specified attributes'
            cand --reflink 'Control clone/CoW copies; data always passes through the GPU, so only auto and never can be honoured'
            cand --sparse 'Control creation of sparse files (auto: stage only the data extents, keep holes)'
            cand --context 'Like -Z, or with CTX set the context to CTX (ignored with a warning, like cp on a kernel without SELinux)'
            cand -S 'Override the usual backup suffix'
            cand --suffix 'Override the usual backup suffix'
            cand -t 'Copy all SOURCE arguments into DIRECTORY'
            cand --target-directory 'Copy all SOURCE arguments into DIRECTORY'
            cand --update 'Control which existing files are updated (-u: older)'
            cand --backend 'Staging backend: auto tries hipFile, then cuFile, then host memory (with a warning); gpu is hipFile or cuFile, an error if neither loads'
            cand --gpu 'GPU(s) to stage through: an index, a list (0,2,3), all, or auto (each file on the GPU nearest its storage by PCI path and NUMA node, all GPUs where that is unknown). With several, each GPU gets STREAMS slots and a file''s slices go to whichever is free'
            cand --route 'How bytes reach GPU memory: library = hipFileRead/Write (cuFileRead/Write) on registered files; bounce = O_DIRECT reads into pinned host memory, copied into the GPU buffer and back out, then O_DIRECT writes; auto = library where it can DMA (hipFile, cuFile with nvidia-fs), except that files under 1 MiB copied many at once (in flight) bounce; bounce where cuFile would only emulate it (compatibility mode)'
            cand --chunk-size 'Bytes per slice; GPU memory used = STREAMS x SIZE on each GPU. E.g. 64M, 1GiB, 0x7ffff000 (at most that), rounded up to a multiple of 4 KiB, and down to a file''s direct-I/O alignment where that is larger [default: 64M on a GPU, 16M on host memory]'
            cand --streams 'Staging slots per GPU: each holds one slice in flight in its own buffer of --chunk-size bytes [default: 4]'
            cand --verify 'After each file, read it back and fail if it is not what was copied. bytes (the default): SOURCE and DEST are read back (DEST with O_DIRECT, so the disk is checked, not the page cache) and compared, naming the first differing offset; a SOURCE that cannot be read twice (a pipe, a device, a /proc file) is copied, then fails: "cannot verify". Measured cost (virtio disk, caches dropped, with sync; three runs): 0.9-1.3x the unverified time for 20,000 files of 1-64 KiB, 1.1-1.3x for a 2 GiB file. sums: only DEST is read back, and its digest compared with the one taken of the staged bytes while copying (--sums''s algorithm, else BLAKE3). Files in flight are read back while the next ones copy'
            cand --sums 'Take a digest of every regular file copied, from the bytes as they are staged (on the GPU where its kernels compile, else on the CPU), and when done print them one file a line in cp''s order, each DEST named as -v names it: blake3 (the default) in the form `b3sum --check FILE` reads; crc64nvme or crc32c as the base64 value S3 shows in its x-amz-checksum-* headers, two spaces, the name (escaped as b3sum escapes). Printed on stdout once the copy ends (after any -v line), unless --sums-file names a file'
            cand --sums-file 'Write the digests to FILE instead of stdout, whole or not at all (a temporary in FILE''s directory renamed over it once the copy ends); implies --sums'
            cand --stats 'When done, print a summary on stdout: labelled lines in words (text, the default): files copied, skipped (-n, -u, -i) and failed, bytes, time, rate, and the library and GPU or host memory staged through, with --debug also the routes, each stage''s thread time, start-up and shutdown and the library''s own counters; or one JSON object (json) with all of these. Where the library''s counters are shown (json, or text with --debug) it asks cuFile to count on the library route (hipFile always counts), which cost 3% of the time of a 1 GiB copy measured on an NVIDIA H200'
            cand --socket 'The service''s socket [default: $XDG_RUNTIME_DIR/aiscp/service.sock]; its directory must be the user''s own with mode 0700 (0755 with --allow-users; made so when missing)'
            cand --allow-users 'Serve these users too (names or uids, comma-separated, or all): a system-wide service. It still reads and writes only the descriptors each client passes'
            cand --idle-exit 'Exit (releasing the GPU) after this long without a client: 90, 30s, 10m, 2h; 0 never'
            cand --idle-release 'Give the staging memory back (keeping the GPU context) after this long with nothing to copy; the next file allocates it again. 0 never'
            cand -a 'Same as -dR --preserve=all'
            cand --archive 'Same as -dR --preserve=all'
            cand --attributes-only 'Don''t copy the file data, just the attributes'
            cand -b 'Like --backup but does not accept an argument'
            cand --copy-contents 'Copy contents of special files when recursive'
            cand -d 'Same as --no-dereference --preserve=links'
            cand -f 'If an existing destination file cannot be opened, remove it and try again'
            cand --force 'If an existing destination file cannot be opened, remove it and try again'
            cand -i 'Prompt before overwrite'
            cand --interactive 'Prompt before overwrite'
            cand -H 'Follow command-line symbolic links in SOURCE'
            cand -l 'Hard link files instead of copying'
            cand --link 'Hard link files instead of copying'
            cand -L 'Always follow symbolic links in SOURCE'
            cand --dereference 'Always follow symbolic links in SOURCE'
            cand -n 'Do not overwrite an existing file'
            cand --no-clobber 'Do not overwrite an existing file'
            cand -P 'Never follow symbolic links in SOURCE'
            cand --no-dereference 'Never follow symbolic links in SOURCE'
            cand -p 'Same as --preserve=mode,ownership,timestamps'
            cand --parents 'Use full source file name under DIRECTORY'
            cand -R 'Copy directories recursively'
            cand -r 'Copy directories recursively'
            cand --recursive 'Copy directories recursively'
            cand --remove-destination 'Remove each existing destination file before attempting to open it'
            cand -Z 'Set the SELinux security context of each new file to the default type (accepted and ignored: aiscp sets no SELinux contexts, as cp on a kernel without SELinux)'
            cand --strip-trailing-slashes 'Remove any trailing slashes from each SOURCE argument'
            cand -s 'Make symbolic links instead of copying'
            cand --symbolic-link 'Make symbolic links instead of copying'
            cand -T 'Treat DEST as a normal file'
            cand --no-target-directory 'Treat DEST as a normal file'
            cand -u 'Equivalent to --update=older'
            cand -v 'Explain what is being done'
            cand --verbose 'Explain what is being done'
            cand -x 'Stay on this file system'
            cand --one-file-system 'Stay on this file system'
            cand --atomic 'Write each file to a temporary name in DEST''s directory, fsync it and rename it over DEST, so readers never see a partial file'
            cand --fsync 'Flush each copied file (and, for new files, its directory) to stable storage before reporting success'
            cand --async 'Use hipFile''s asynchronous stream API (one stream per slice)'
            cand --progress 'Show the run''s progress on stderr: a bar with the percentage, bytes, files, rate and ETA redrawn in place on a terminal, a plain line every 2 seconds otherwise (for logs); asked for, its last line stays at the end [default: only when stderr is a terminal]'
            cand --no-progress 'Never show progress'
            cand --debug 'Report the backend, library, GPU, chunk, slots and each file''s route on stderr'
            cand -q 'Suppress warnings (such as falling back to host memory when no GPU library loads)'
            cand --quiet 'Suppress warnings (such as falling back to host memory when no GPU library loads)'
            cand --doctor 'Check what GPU staging needs on this machine: libraries and versions, GPUs and their memory, and the route files under each operand (a PATH here) would take, and why. Exit 0 when a GPU route is possible'
            cand --serve 'Instead of copying, run the staging service in the foreground: bring the staging backend up once (with the GPU staging options given here) and copy the file data of every aiscp run of this user that finds its socket (see AISCP_SERVICE)'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
    ]
    $completions[$command]
}
