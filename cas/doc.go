// Package cas is hg's content-addressed store: blocks named by CIDv1
// (sha2-256), their canonical encodings, and what is built of them.
//
// A [Block] is bytes and the CID they hash to. Typed objects are encoded as
// strict, canonical DAG-CBOR ([Marshal], [Unmarshal], [EncodeNode],
// [DecodeNode]); a block that is not canonical is refused on read, as one
// that does not hash to its CID is ([ErrNotCanonical], [ErrCorrupt]). DAG-JSON
// is the text form ([EncodeJSON], [DecodeJSON]).
//
// A [Store] keeps blocks, pins (the user's named roots) and refs (named CIDs
// in namespaces other packages own: runs, the memo cache, belief logs). Its
// implementations are cas/boltstore (on disk) and cas/memstore (in memory);
// cas/storetest is the suite both pass. A Store is composed of small
// interfaces ([BlockReader], [BlockWriter], [BlockEnumerator], [PinStore],
// [RefStore]), and what only reads blocks takes a BlockReader. On top of
// any Store: files and trees ([PutFile], [PutTree], hg/file@1 and
// hg/tree@1 objects), bulk writes ([PutPacked], which a [BulkPutter]
// store does its own way), walking and garbage collection ([GC]), checking
// ([Fsck]), CARv1 bundles ([ExportCAR], [ImportCAR]), and values over the
// block limit, stored out of line ([Outline], [PutObject]).
//
// Nothing here knows about Haygents, receipts or Work Orders: those are
// objects other packages encode with this one.
package cas
