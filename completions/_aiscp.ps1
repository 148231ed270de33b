
using namespace System.Management.Automation
using namespace System.Management.Automation.Language

Register-ArgumentCompleter -Native -CommandName 'aiscp' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)

    $commandElements = $commandAst.CommandElements
    $command = @(
        'aiscp'
        for ($i = 1; $i -lt $commandElements.Count; $i++) {
            $element = $commandElements[$i]
            if ($element -isnot [StringConstantExpressionAst] -or
                $element.StringConstantType -ne [StringConstantType]::BareWord -or
                $element.Value.StartsWith('-') -or
                $element.Value -eq $wordToComplete) {
                break
        }
        $element.Value
    }) -join ';'

    $completions = @(switch ($command) {
        'aiscp' {
            [CompletionResult]::new('--backup', '--backup', [CompletionResultType]::ParameterName, 'Make a backup of each existing destination file')
            [CompletionResult]::new('--preserve', '--preserve', [CompletionResultType]::ParameterName, 'Preserve the specified attributes (default: mode,ownership,timestamps), if possible additional attributes: context, links, xattr, all')
            [CompletionResult]::new('--no-preserve', '--no-preserve', [CompletionResultType]::ParameterName, 'Don''t preserve the specified attributes')
            [CompletionResult]::new('--reflink', '--reflink', [CompletionResultType]::ParameterName, 'Control clone/CoW copies; data always passes through the GPU, so only auto and never can be honoured')
            [CompletionResult]::new('--sparse', '--sparse', [CompletionResultType]::ParameterName, 'Control creation of sparse files (auto: stage only the data extents, keep holes)')
            [CompletionResult]::new('--context', '--context', [CompletionResultType]::ParameterName, 'Like -Z, or with CTX set the context to CTX (ignored with a warning, like cp on a kernel without SELinux)')
            [CompletionResult]::new('-S', '-S ', [CompletionResultType]::ParameterName, 'Override the usual backup suffix')
            [CompletionResult]::new('--suffix', '--suffix', [CompletionResultType]::ParameterName, 'Override the usual backup suffix')
            [CompletionResult]::new('-t', '-t', [CompletionResultType]::ParameterName, 'Copy all SOURCE arguments into DIRECTORY')
            [CompletionResult]::new('--target-directory', '--target-directory', [CompletionResultType]::ParameterName, 'Copy all SOURCE arguments into DIRECTORY')
            [CompletionResult]::new('--update', '--update', [CompletionResultType]::ParameterName, 'Control which existing files are updated (-u: older)')
            [CompletionResult]::new('--backend', '--backend', [CompletionResultType]::ParameterName, 'Staging backend: auto tries hipFile, then cuFile, then host memory (with a warning); gpu is hipFile or cuFile, an error if neither loads')
            [CompletionResult]::new('--gpu', '--gpu', [CompletionResultType]::ParameterName, 'GPU(s) to stage through: an index, a list (0,2,3), all, or auto (each file on the GPU nearest its storage by PCI path and NUMA node, all GPUs where that is unknown). With several, each GPU gets STREAMS slots and a file''s slices go to whichever is free')
            [CompletionResult]::new('--route', '--route', [CompletionResultType]::ParameterName, 'How bytes reach GPU memory: library = hipFileRead/Write (cuFileRead/Write) on registered files; bounce = O_DIRECT reads into pinned host memory, copied into the GPU buffer and back out, then O_DIRECT writes; auto = library where it can DMA (hipFile, cuFile with nvidia-fs), except that files under 1 MiB copied many at once (in flight) bounce; bounce where cuFile would only emulate it (compatibility mode)')
            [CompletionResult]::new('--chunk-size', '--chunk-size', [CompletionResultType]::ParameterName, 'Bytes per slice; GPU memory used = STREAMS x SIZE on each GPU. E.g. 64M, 1GiB, 0x7ffff000 (at most that), rounded up to a multiple of 4 KiB, and down to a file''s direct-I/O alignment where that is larger [default: 64M on a GPU, 16M on host memory]')
            [CompletionResult]::new('--streams', '--streams', [CompletionResultType]::ParameterName, 'Staging slots per GPU: each holds one slice in flight in its own buffer of --chunk-size bytes [default: 4]')
            [CompletionResult]::new('--verify', '--verify', [CompletionResultType]::ParameterName, 'After each file, read it back and fail if it is not what was copied. bytes (the default): SOURCE and DEST are read back (DEST with O_DIRECT, so the disk is checked, not the page cache) and compared, naming the first differing offset; a SOURCE that cannot be read twice (a pipe, a device, a /proc file) is copied, then fails: "cannot verify". Measured cost (virtio disk, caches dropped, with sync; three runs): 0.9-1.3x the unverified time for 20,000 files of 1-64 KiB, 1.1-1.3x for a 2 GiB file. sums: only DEST is read back, and its digest compared with the one taken of the staged bytes while copying (--sums''s algorithm, else BLAKE3). Files in flight are read back while the next ones copy')
            [CompletionResult]::new('--sums', '--sums', [CompletionResultType]::ParameterName, 'Take a digest of every regular file copied, from the bytes as they are staged (on the GPU where its kernels compile, else on the CPU), and when done print them one file a line in cp''s order, each DEST named as -v names it: blake3 (the default) in the form `b3sum --check FILE` reads; crc64nvme or crc32c as the base64 value S3 shows in its x-amz-checksum-* headers, two spaces, the name (escaped as b3sum escapes). Printed on stdout once the copy ends (after any -v line), unless --sums-file names a file')
            [CompletionResult]::new('--sums-file', '--sums-file', [CompletionResultType]::ParameterName, 'Write the digests to FILE instead of stdout, whole or not at all (a temporary in FILE''s directory renamed over it once the copy ends); implies --sums')
            [CompletionResult]::new('--stats', '--stats', [CompletionResultType]::ParameterName, 'When done, print a summary on stdout: labelled lines in words (text, the default): files copied, skipped (-n, -u, -i) and failed, bytes, time, rate, and the library and GPU or host memory staged through, with --debug also the routes, each stage''s thread time, start-up and shutdown and the library''s own counters; or one JSON object (json) with all of these. Where the library''s counters are shown (json, or text with --debug) it asks cuFile to count on the library route (hipFile always counts), which cost 3% of the time of a 1 GiB copy measured on an NVIDIA H200')
            [CompletionResult]::new('--socket', '--socket', [CompletionResultType]::ParameterName, 'The service''s socket [default: $XDG_RUNTIME_DIR/aiscp/service.sock]; its directory must be the user''s own with mode 0700 (0755 with --allow-users; made so when missing)')
            [CompletionResult]::new('--allow-users', '--allow-users', [CompletionResultType]::ParameterName, 'Serve these users too (names or uids, comma-separated, or all): a system-wide service. It still reads and writes only the descriptors each client passes')
            [CompletionResult]::new('--idle-exit', '--idle-exit', [CompletionResultType]::ParameterName, 'Exit (releasing the GPU) after this long without a client: 90, 30s, 10m, 2h; 0 never')
            [CompletionResult]::new('--idle-release', '--idle-release', [CompletionResultType]::ParameterName, 'Give the staging memory back (keeping the GPU context) after this long with nothing to copy; the next file allocates it again. 0 never')
            [CompletionResult]::new('-a', '-a', [CompletionResultType]::ParameterName, 'Same as -dR --preserve=all')
            [CompletionResult]::new('--archive', '--archive', [CompletionResultType]::ParameterName, 'Same as -dR --preserve=all')
            [CompletionResult]::new('--attributes-only', '--attributes-only', [CompletionResultType]::ParameterName, 'Don''t copy the file data, just the attributes')
            [CompletionResult]::new('-b', '-b', [CompletionResultType]::ParameterName, 'Like --backup but does not accept an argument')
            [CompletionResult]::new('--copy-contents', '--copy-contents', [CompletionResultType]::ParameterName, 'Copy contents of special files when recursive')
            [CompletionResult]::new('-d', '-d', [CompletionResultType]::ParameterName, 'Same as --no-dereference --preserve=links')
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'If an existing destination file cannot be opened, remove it and try again')
            [CompletionResult]::new('--force', '--force', [CompletionResultType]::ParameterName, 'If an existing destination file cannot be opened, remove it and try again')
            [CompletionResult]::new('-i', '-i', [CompletionResultType]::ParameterName, 'Prompt before overwrite')
            [CompletionResult]::new('--interactive', '--interactive', [CompletionResultType]::ParameterName, 'Prompt before overwrite')
            [CompletionResult]::new('-H', '-H ', [CompletionResultType]::ParameterName, 'Follow command-line symbolic links in SOURCE')
            [CompletionResult]::new('-l', '-l', [CompletionResultType]::ParameterName, 'Hard link files instead of copying')
            [CompletionResult]::new('--link', '--link', [CompletionResultType]::ParameterName, 'Hard link files instead of copying')
            [CompletionResult]::new('-L', '-L ', [CompletionResultType]::ParameterName, 'Always follow symbolic links in SOURCE')
            [CompletionResult]::new('--dereference', '--dereference', [CompletionResultType]::ParameterName, 'Always follow symbolic links in SOURCE')
            [CompletionResult]::new('-n', '-n', [CompletionResultType]::ParameterName, 'Do not overwrite an existing file')
            [CompletionResult]::new('--no-clobber', '--no-clobber', [CompletionResultType]::ParameterName, 'Do not overwrite an existing file')
            [CompletionResult]::new('-P', '-P ', [CompletionResultType]::ParameterName, 'Never follow symbolic links in SOURCE')
            [CompletionResult]::new('--no-dereference', '--no-dereference', [CompletionResultType]::ParameterName, 'Never follow symbolic links in SOURCE')
            [CompletionResult]::new('-p', '-p', [CompletionResultType]::ParameterName, 'Same as --preserve=mode,ownership,timestamps')
            [CompletionResult]::new('--parents', '--parents', [CompletionResultType]::ParameterName, 'Use full source file name under DIRECTORY')
            [CompletionResult]::new('-R', '-R ', [CompletionResultType]::ParameterName, 'Copy directories recursively')
            [CompletionResult]::new('-r', '-r', [CompletionResultType]::ParameterName, 'Copy directories recursively')
            [CompletionResult]::new('--recursive', '--recursive', [CompletionResultType]::ParameterName, 'Copy directories recursively')
            [CompletionResult]::new('--remove-destination', '--remove-destination', [CompletionResultType]::ParameterName, 'Remove each existing destination file before attempting to open it')
            [CompletionResult]::new('-Z', '-Z ', [CompletionResultType]::ParameterName, 'Set the SELinux security context of each new file to the default type (accepted and ignored: aiscp sets no SELinux contexts, as cp on a kernel without SELinux)')
            [CompletionResult]::new('--strip-trailing-slashes', '--strip-trailing-slashes', [CompletionResultType]::ParameterName, 'Remove any trailing slashes from each SOURCE argument')
            [CompletionResult]::new('-s', '-s', [CompletionResultType]::ParameterName, 'Make symbolic links instead of copying')
            [CompletionResult]::new('--symbolic-link', '--symbolic-link', [CompletionResultType]::ParameterName, 'Make symbolic links instead of copying')
            [CompletionResult]::new('-T', '-T ', [CompletionResultType]::ParameterName, 'Treat DEST as a normal file')
            [CompletionResult]::new('--no-target-directory', '--no-target-directory', [CompletionResultType]::ParameterName, 'Treat DEST as a normal file')
            [CompletionResult]::new('-u', '-u', [CompletionResultType]::ParameterName, 'Equivalent to --update=older')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Explain what is being done')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Explain what is being done')
            [CompletionResult]::new('-x', '-x', [CompletionResultType]::ParameterName, 'Stay on this file system')
            [CompletionResult]::new('--one-file-system', '--one-file-system', [CompletionResultType]::ParameterName, 'Stay on this file system')
            [CompletionResult]::new('--atomic', '--atomic', [CompletionResultType]::ParameterName, 'Write each file to a temporary name in DEST''s directory, fsync it and rename it over DEST, so readers never see a partial file')
            [CompletionResult]::new('--fsync', '--fsync', [CompletionResultType]::ParameterName, 'Flush each copied file (and, for new files, its directory) to stable storage before reporting success')
            [CompletionResult]::new('--async', '--async', [CompletionResultType]::ParameterName, 'Use hipFile''s asynchronous stream API (one stream per slice)')
            [CompletionResult]::new('--progress', '--progress', [CompletionResultType]::ParameterName, 'Show the run''s progress on stderr: a bar with the percentage, bytes, files, rate and ETA redrawn in place on a terminal, a plain line every 2 seconds otherwise (for logs); asked for, its last line stays at the end [default: only when stderr is a terminal]')
            [CompletionResult]::new('--no-progress', '--no-progress', [CompletionResultType]::ParameterName, 'Never show progress')
            [CompletionResult]::new('--debug', '--debug', [CompletionResultType]::ParameterName, 'Report the backend, library, GPU, chunk, slots and each file''s route on stderr')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Suppress warnings (such as falling back to host memory when no GPU library loads)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Suppress warnings (such as falling back to host memory when no GPU library loads)')
            [CompletionResult]::new('--doctor', '--doctor', [CompletionResultType]::ParameterName, 'Check what GPU staging needs on this machine: libraries and versions, GPUs and their memory, and the route files under each operand (a PATH here) would take, and why. Exit 0 when a GPU route is possible')
            [CompletionResult]::new('--serve', '--serve', [CompletionResultType]::ParameterName, 'Instead of copying, run the staging service in the foreground: bring the staging backend up once (with the GPU staging options given here) and copy the file data of every aiscp run of this user that finds its socket (see AISCP_SERVICE)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}
