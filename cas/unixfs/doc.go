// Package unixfs reads UnixFS, the file and directory format of IPFS, as
// kubo writes it: dag-pb blocks ([DecodePBNode], strict per the dag-pb
// specification) carrying a UnixFS Data message ([DecodeData]), and raw
// blocks as file chunks.
//
// # Reading
//
// [Load] reads one node, verified against its CID by the store, and
// checks it on its own. [ReadFile] streams a file, checking every size the
// DAG declares against the bytes it finds. [Entries] lists a directory,
// plain or HAMT-sharded (murmur3-x64-64, any power-of-two fanout), and
// refuses unsafe or repeated names. [WriteTree] writes a directory
// atomically, as hg writes its own trees, and writes a symlink only when
// its target cannot leave the tree ([SafeSymlinkTarget]). [Stat] describes
// a node for 'hg stat'.
//
// # Not read
//
// UnixFS Metadata nodes are refused ([ErrUnsupported]); modes and mtimes
// are decoded but not applied. Nothing here writes UnixFS: hg stores its
// own files as hg/file@1 and hg/tree@1 (package cas).
//
// # Bounds
//
// A hostile DAG cannot make a walk run unbounded: a file is at most
// [MaxFileDepth] nodes deep, directories nest at most [MaxDirDepth] deep,
// a HAMT at most as deep as its 64-bit hash allows, and every node is a
// block of at most [cas.MaxBlockSize] bytes.
package unixfs
