complete -c aiscp -l backup -d 'Make a backup of each existing destination file' -f -a "none\t''
off\t''
simple\t''
never\t''
existing\t''
nil\t''
numbered\t''
t\t''"
complete -c aiscp -l preserve -d 'Preserve the specified attributes (default: mode,ownership,timestamps), if possible additional attributes: context, links, xattr, all' -f -a "mode\t''
timestamps\t''
ownership\t''
links\t''
context\t''
xattr\t''
all\t''"
complete -c aiscp -l no-preserve -d 'Don\'t preserve the specified attributes' -r -f -a "mode\t''
timestamps\t''
ownership\t''
links\t''
context\t''
xattr\t''
all\t''"
complete -c aiscp -l reflink -d 'Control clone/CoW copies; data always passes through the GPU, so only auto and never can be honoured' -f -a "auto\t''
always\t''
never\t''"
complete -c aiscp -l sparse -d 'Control creation of sparse files (auto: stage only the data extents, keep holes)' -r -f -a "never\t''
auto\t''
always\t''"
complete -c aiscp -l context -d 'Like -Z, or with CTX set the context to CTX (ignored with a warning, like cp on a kernel without SELinux)'
complete -c aiscp -s S -l suffix -d 'Override the usual backup suffix' -r
complete -c aiscp -s t -l target-directory -d 'Copy all SOURCE arguments into DIRECTORY' -r -f -a "(__fish_complete_directories)"
complete -c aiscp -l update -d 'Control which existing files are updated (-u: older)' -f -a "all\t''
none\t''
none-fail\t''
older\t''"
complete -c aiscp -l backend -d 'Staging backend: auto tries hipFile, then cuFile, then host memory (with a warning); gpu is hipFile or cuFile, an error if neither loads' -r -f -a "auto\t''
gpu\t''
hipfile\t''
cufile\t''
host\t''"
complete -c aiscp -l gpu -d 'GPU(s) to stage through: an index, a list (0,2,3), all, or auto (each file on the GPU nearest its storage by PCI path and NUMA node, all GPUs where that is unknown). With several, each GPU gets STREAMS slots and a file\'s slices go to whichever is free' -r
complete -c aiscp -l route -d 'How bytes reach GPU memory: library = hipFileRead/Write (cuFileRead/Write) on registered files; bounce = O_DIRECT reads into pinned host memory, copied into the GPU buffer and back out, then O_DIRECT writes; auto = library where it can DMA (hipFile, cuFile with nvidia-fs), except that files under 1 MiB copied many at once (in flight) bounce; bounce where cuFile would only emulate it (compatibility mode)' -r -f -a "auto\t''
library\t''
bounce\t''"
complete -c aiscp -l chunk-size -d 'Bytes per slice; GPU memory used = STREAMS x SIZE on each GPU. E.g. 64M, 1GiB, 0x7ffff000 (at most that), rounded up to a multiple of 4 KiB, and down to a file\'s direct-I/O alignment where that is larger [default: 64M on a GPU, 16M on host memory]' -r
complete -c aiscp -l streams -d 'Staging slots per GPU: each holds one slice in flight in its own buffer of --chunk-size bytes [default: 4]' -r
complete -c aiscp -l verify -d 'After each file, read it back and fail if it is not what was copied. bytes (the default): SOURCE and DEST are read back (DEST with O_DIRECT, so the disk is checked, not the page cache) and compared, naming the first differing offset; a SOURCE that cannot be read twice (a pipe, a device, a /proc file) is copied, then fails: "cannot verify". Measured cost (virtio disk, caches dropped, with sync; three runs): 0.9-1.3x the unverified time for 20,000 files of 1-64 KiB, 1.1-1.3x for a 2 GiB file. sums: only DEST is read back, and its digest compared with the one taken of the staged bytes while copying (--sums\'s algorithm, else BLAKE3). Files in flight are read back while the next ones copy' -f -a "bytes\t''
sums\t''"
complete -c aiscp -l sums -d 'Take a digest of every regular file copied, from the bytes as they are staged (on the GPU where its kernels compile, else on the CPU), and when done print them one file a line in cp\'s order, each DEST named as -v names it: blake3 (the default) in the form `b3sum --check FILE` reads; crc64nvme or crc32c as the base64 value S3 shows in its x-amz-checksum-* headers, two spaces, the name (escaped as b3sum escapes). Printed on stdout once the copy ends (after any -v line), unless --sums-file names a file' -f -a "blake3\t''
crc64nvme\t''
crc32c\t''"
complete -c aiscp -l sums-file -d 'Write the digests to FILE instead of stdout, whole or not at all (a temporary in FILE\'s directory renamed over it once the copy ends); implies --sums' -r -F
complete -c aiscp -l stats -d 'When done, print a summary on stdout: labelled lines in words (text, the default): files copied, skipped (-n, -u, -i) and failed, bytes, time, rate, and the library and GPU or host memory staged through, with --debug also the routes, each stage\'s thread time, start-up and shutdown and the library\'s own counters; or one JSON object (json) with all of these. Where the library\'s counters are shown (json, or text with --debug) it asks cuFile to count on the library route (hipFile always counts), which cost 3% of the time of a 1 GiB copy measured on an NVIDIA H200' -f -a "text\t''
json\t''"
complete -c aiscp -l socket -d 'The service\'s socket [default: $XDG_RUNTIME_DIR/aiscp/service.sock]; its directory must be the user\'s own with mode 0700 (0755 with --allow-users; made so when missing)' -r -F
complete -c aiscp -l allow-users -d 'Serve these users too (names or uids, comma-separated, or all): a system-wide service. It still reads and writes only the descriptors each client passes' -r
complete -c aiscp -l idle-exit -d 'Exit (releasing the GPU) after this long without a client: 90, 30s, 10m, 2h; 0 never' -r
complete -c aiscp -l idle-release -d 'Give the staging memory back (keeping the GPU context) after this long with nothing to copy; the next file allocates it again. 0 never' -r
complete -c aiscp -s a -l archive -d 'Same as -dR --preserve=all'
complete -c aiscp -l attributes-only -d 'Don\'t copy the file data, just the attributes'
complete -c aiscp -s b -d 'Like --backup but does not accept an argument'
complete -c aiscp -l copy-contents -d 'Copy contents of special files when recursive'
complete -c aiscp -s d -d 'Same as --no-dereference --preserve=links'
complete -c aiscp -s f -l force -d 'If an existing destination file cannot be opened, remove it and try again'
complete -c aiscp -s i -l interactive -d 'Prompt before overwrite'
complete -c aiscp -s H -d 'Follow command-line symbolic links in SOURCE'
complete -c aiscp -s l -l link -d 'Hard link files instead of copying'
complete -c aiscp -s L -l dereference -d 'Always follow symbolic links in SOURCE'
complete -c aiscp -s n -l no-clobber -d 'Do not overwrite an existing file'
complete -c aiscp -s P -l no-dereference -d 'Never follow symbolic links in SOURCE'
complete -c aiscp -s p -d 'Same as --preserve=mode,ownership,timestamps'
complete -c aiscp -l parents -d 'Use full source file name under DIRECTORY'
complete -c aiscp -s R -s r -l recursive -d 'Copy directories recursively'
complete -c aiscp -l remove-destination -d 'Remove each existing destination file before attempting to open it'
complete -c aiscp -s Z -d 'Set the SELinux security context of each new file to the default type (accepted and ignored: aiscp sets no SELinux contexts, as cp on a kernel without SELinux)'
complete -c aiscp -l strip-trailing-slashes -d 'Remove any trailing slashes from each SOURCE argument'
complete -c aiscp -s s -l symbolic-link -d 'Make symbolic links instead of copying'
complete -c aiscp -s T -l no-target-directory -d 'Treat DEST as a normal file'
complete -c aiscp -s u -d 'Equivalent to --update=older'
complete -c aiscp -s v -l verbose -d 'Explain what is being done'
complete -c aiscp -s x -l one-file-system -d 'Stay on this file system'
complete -c aiscp -l atomic -d 'Write each file to a temporary name in DEST\'s directory, fsync it and rename it over DEST, so readers never see a partial file'
complete -c aiscp -l fsync -d 'Flush each copied file (and, for new files, its directory) to stable storage before reporting success'
complete -c aiscp -l async -d 'Use hipFile\'s asynchronous stream API (one stream per slice)'
complete -c aiscp -l progress -d 'Show the run\'s progress on stderr: a bar with the percentage, bytes, files, rate and ETA redrawn in place on a terminal, a plain line every 2 seconds otherwise (for logs); asked for, its last line stays at the end [default: only when stderr is a terminal]'
complete -c aiscp -l no-progress -d 'Never show progress'
complete -c aiscp -l debug -d 'Report the backend, library, GPU, chunk, slots and each file\'s route on stderr'
complete -c aiscp -s q -l quiet -d 'Suppress warnings (such as falling back to host memory when no GPU library loads)'
complete -c aiscp -l doctor -d 'Check what GPU staging needs on this machine: libraries and versions, GPUs and their memory, and the route files under each operand (a PATH here) would take, and why. Exit 0 when a GPU route is possible'
complete -c aiscp -l serve -d 'Instead of copying, run the staging service in the foreground: bring the staging backend up once (with the GPU staging options given here) and copy the file data of every aiscp run of this user that finds its socket (see AISCP_SERVICE)'
complete -c aiscp -s h -l help -d 'Print help (see more with \'--help\')'
complete -c aiscp -s V -l version -d 'Print version'
