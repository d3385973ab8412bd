// Package natsengine runs a scheduler's invocations on workers over NATS
// JetStream: [Engine] implements [scheduler.Engine] by publishing each
// invocation to a work queue, and [Serve] is a worker that takes them,
// runs them with a [scheduler.Local] engine under its own key, and
// publishes the outcomes.
//
// The scheduler trusts none of it: it verifies every receipt that comes
// back with its own code and accepts it only if the receipt is signed by
// a key in its Trusted list. Giving workers' public keys to the scheduler
// is how a deployment says which workers it trusts.
//
// # Streams, subjects and objects
//
// With the default [Names]:
//
//	HG_WORK     work-queue stream, subjects hg.work.ID: one message per
//	            invocation, or hg.work.batch-TOKEN: several invocations
//	            in one message (below)
//	hg-workers  the durable pull consumer on HG_WORK that every worker shares,
//	            so each invocation goes to one worker
//	HG_RESULTS  work-queue stream, subjects hg.result.ENGINE.ID: notices and
//	            outcomes; each engine reads its own ENGINE through a consumer
//	            of its own and acks (so removes) what it read
//	hg.cancel.ID  core subject: an engine gave up on ID (ctx ended, timeout)
//	hg.beat.ENGINE.ID  core subject: a worker's heartbeat while it runs ID
//	hg.want.ENGINE  core subject: a worker asks the engine which invocations
//	            of a message handed out again it still waits for
//	HG_BLOBS    Object Store: block lists too big for a message
//	HG_BLOCKS   Object Store: workspace blocks, each an object named
//	            "block-CID" ([BlockObject]: the CID's canonical text form)
//
// Whoever comes first (engine or worker) creates the streams and the
// buckets, kept by [Names.Replicas] servers of a cluster (default 1;
// the consumers inherit it); an existing one is used as it is. Work
// messages and results older than a day, and objects older than a day,
// are removed by the server, which bounds what engines that died leave
// behind.
//
// # Messages
//
// Every body is canonical DAG-CBOR ([cas.Marshal]) and is decoded
// strictly ([cas.Unmarshal]: unknown or missing fields, non-canonical
// bytes are refused). A block is {"cid": bytes (binary CID), "data":
// bytes}. An invocation (subject hg.work.ID, message id ID, so a
// retried publish is not queued twice):
//
//	{"type": "hg/nats-invocation@3", "id": ID (32 hex digits),
//	 "reply": "hg.result.ENGINE.ID", "deadline": RFC 3339 time,
//	 "run", "node", "package": link to the package tree,
//	 "blocks": [every block of the package tree] (only if inline),
//	 "input": the input, as a data-model map, "upstream": [links],
//	 "workspace": link to the workspace tree (only for a node given one)}
//
// Neither the package's blocks nor a workspace's are in an engine's
// message: they travel through HG_BLOCKS (below), so that a worker
// fetches a package once, not with every invocation of it (version 1 of
// the message carried them, and a worker refuses it by its type). A
// message may still carry the package inline, as tests do. A "workspace" that is not a defined CID is refused.
// Version 3 is version 2 from an engine that reads batched outcomes
// (below); a worker still takes version 2, and answers it reply by reply.
// A block's object in HG_BLOCKS holds the block's bytes and nothing else
// (no envelope): at most [cas.MaxBlockSize] of them (a bigger object is
// refused by its info, unread), which must hash to the CID its name
// gives.
//
// A remote worker cannot ask the scheduler anything, nor need it: the
// scheduler verifies every receipt it gets, and accepts one only if its
// input packet records the accepted receipts it sent as upstream.
//
// A worker answers on the reply subject with
//
//	{"type": "hg/nats-outcome@1", "id", "state": "done"|"error",
//	 "worker": "ed25519:...", "receipt": link (done),
//	 "blocks": [the blocks the invocation wrote] (done),
//	 "object": "outcome-ID-N" (done, when the blocks are in HG_BLOBS),
//	 "error": text (error)}
//
// A worker whose replies to one engine come while it is publishing one
// to that engine (its jobs finish together) sends them together, at
// most [MaxBatchOutcomes] and the inline limit a message, when their
// requests are of version 3, on PREFIX.result.ENGINE.batch-TOKEN
// (TOKEN 32 hex digits, also the message id):
//
//	{"type": "hg/nats-outcomes@1", "outcomes": [replies as above,
//	 each "done" or "error"]}
//
// A reply alone goes on its invocation's own subject, as above, so no
// reply waits for another. The engine decodes a batch strictly as a
// whole (one that does not decode hands nothing to anyone, and its
// invocations wait for a good reply) and judges each member alone: one
// for an invocation it is not waiting for (another engine's, or one
// answered before) is dropped; an invocation named twice, a member of
// another type or state, and every member of a batch of more than
// [MaxBatchOutcomes], are refused to their invocations; any other is
// handed to its invocation as a single reply would be, its blocks
// verified and its receipt left to the scheduler. A batch cannot do
// what single replies cannot: anyone who may publish on the engine's
// result subjects could already answer any of its invocations.
//
// While it runs an invocation, a worker publishes a heartbeat on the
// core subject hg.beat.ENGINE.ID (ENGINE and ID from the reply subject)
// when it takes it and then every AckWait/3, at least every 5 seconds
// (several invocations of one engine in one message share one heartbeat,
// [TypeHeartbeats]):
//
//	{"type": "hg/nats-heartbeat@1", "id": ID, "worker": "ed25519:..."}
//
// The first heartbeat says which worker took the invocation (workers of
// before it also answered with a "started" reply, which an engine still
// reads as a heartbeat). The engine decodes it strictly (canonical DAG-CBOR, exactly these
// fields, an id that is the subject's, a key in its text form) and drops
// anything else. A heartbeat is information only: it tells the engine
// which worker says it has the invocation and that it is still heard
// from, for what the engine says while it waits; it never completes,
// accepts or fails an invocation. Anyone who can publish on the subject
// can make an engine believe a worker is busy, and no more. A worker
// older than heartbeats is said to be silent after [Options.Silence]
// while it runs a long invocation: a notice, nothing more.
//
// "done" carries the outcome; "error"
// says why it could not be carried out (a message refused, a package that
// does not load, an input the contract refuses, a workspace refused).
// Neither the package's own blocks nor the blocks of the workspace the
// invocation was given are sent back: the engine has them and adds them
// to the [scheduler.Outcome] (so a final workspace's unchanged blocks do
// not travel back; its new ones come with the outcome's blocks). A worker
// that leaves out other blocks gains nothing: the scheduler refuses a
// receipt whose closure is not whole.
//
// # Several invocations, and several outcomes, a message
//
// The invocations an engine is asked for while it publishes one go
// together as one message on hg.work.batch-TOKEN (TOKEN 32 hex digits,
// also the message id), at most [Options.MaxBatch] ([MaxBatchInvocations]
// by default) and the inline limit's bytes:
//
//	{"type": "hg/nats-invocations@1", "invocations": [bodies, each
//	 exactly an "hg/nats-invocation@3" body, with its own id and reply]}
//
// and the replies a worker has for one engine while it publishes one go
// together likewise, on hg.result.ENGINE.batch-TOKEN ([TypeOutcomes],
// at most [MaxBatchOutcomes]). An invocation asked for alone still goes
// alone, so an engine whose invocations come one at a time sends what it
// did before, and no invocation waits for one that is not there yet. The
// server then stores, hands out and removes one message for several
// invocations: with a scheduler whose jobs keep two workers' slots full
// (bench_test.go), a node costs about one server message instead of
// eleven.
//
// A worker decodes a batch strictly and judges each member alone, as it
// would a message of its own: one that does not decode, repeats an id
// of the batch or names a reply subject not of the result subjects is
// refused (told with an "error" reply when it decoded); the others run,
// each in a job slot of its own (the message took one; each other member
// waits for one, before the worker takes another message). The worker
// acks the message once every member is settled, and hands it back if
// any could not be answered. A batch of more than [MaxBatchInvocations]
// is refused whole. The engine likewise judges each member of a batch of
// outcomes alone.
//
// A message handed out again (its worker died, handed it back, or its ack
// was lost) may hold invocations already answered. Before it runs such a
// message, a worker asks each engine its members name, on the core
// subject hg.want.ENGINE, {"type": "hg/nats-want@1", "ids": [...]}, and
// the engine answers, on the asker's inbox only, with the same body
// holding the ids it still waits for; the worker runs only those
// ("skipped" the others). An engine that does not answer within two
// seconds gets every member run. The answer is information, never
// evidence: whoever can answer it could as well cancel the invocations,
// and no one can make a scheduler accept anything by it.
//
// A batch handed out again then runs no more as a batch: the worker
// queues each member it still has to run as a message of its own, on
// hg.work.ID with message id ID and the header Hg-Queued-Again (whose
// taker asks the want question too), and acks the batch; members it could
// not queue it runs itself. So a member that brings its workers down is
// handed out, and fails at the consumer's MaxDeliver, alone: the engine
// finds an invocation so queued by its subject when the server's
// max-deliveries advisory names a sequence it did not publish (a message
// with that header and message id only, a few looked up at once).
//
// The engine takes a message off the queue once every invocation in it
// is answered or given up on; an invocation given up on while others of
// its message are open is only cancelled, and every worker remembers a
// cancelled id for an hour (at most 16,384 of them) and does not start
// it ("stopped"). A worker that was not connected when the cancel went
// out does not know of it: a scheduler gives up on a run's invocations
// all together, so that this happens only to a caller of [Engine.Invoke]
// that gives up on one of several it made at once. The server's
// max-deliveries advisory for a batch fails every invocation still
// open in it.
//
// When a batch of outcomes arrives, the engine checks the signatures of
// the receipts it carries as one batch ([ledger.Signatures.PrecheckReceipts],
// several times faster than one by one) into the signature cache the
// scheduler gave with each invocation ([scheduler.Invocation].Signatures):
// a receipt block hashed against its CID, and remembered as signed only
// when the whole batch verifies. That decides nothing: the scheduler
// still verifies every receipt in full, finding only its signature
// checked, and a batch that fails leaves each receipt to its own check.
//
// # Large invocations and outcomes
//
// A message body over the inline limit (512 KiB by default, never more
// than the server's max payload less 8 KiB; [Options.InlineLimit],
// [WorkerOptions.InlineLimit]) does not carry its blocks: they go to the
// Object Store as one object, {"type": "hg/nats-blocks@1", "blocks":
// [...]}, and the message names it. The Object Store chunks it, so an
// outcome of any size travels. The engine deletes the outcome's object
// once it has it. Blocks read from an object
// are verified against their CIDs like inline ones.
//
// # Workspaces and packages
//
// A node's workspace, and its Haygent package, travel block by block, each block once, through
// HG_BLOCKS, an Object Store in which every block is one object whose
// name is derived from its CID. Before it queues an invocation, the
// engine makes sure every block of the package and the workspace is there: a block it
// put (or found) less than half the bucket's TTL ago is skipped without
// asking, one whose object is there with the block's size and SHA-256
// digest (the Object Store's own, from the object's info) is not put
// again, and any other is put, so garbage under a block's name is
// replaced. [Options.BlockPut] is told of each block put. A second node
// on the same tree, or on a tree that shares most of its blocks (a final
// workspace handed on along an edge), puts only the blocks that are new.
//
// A worker walks the tree from the root named in the message, a level at
// a time: it takes a block from its cache of verified blocks
// ([WorkspaceOptions].CacheBytes, 1 GiB by default, oldest dropped first)
// or fetches its object, four at a time, and verifies it against
// its CID ([cas.NewBlockWithCID]) before it reads a link from it or
// caches it; only links read from verified blocks are followed. So a
// block crosses the wire from the server at most once per worker while
// it stays in that worker's cache, and a worker never runs on, nor keeps,
// a block it did not hash. It refuses, with an "error" reply, and runs
// nothing: a block whose bytes do not match its CID, a block that is not
// in the bucket, an object over [cas.MaxBlockSize] (by its info, before
// it is read), and a tree of more blocks or bytes than
// [WorkspaceOptions].MaxBlocks and MaxBytes (1<<20 blocks and 4 GiB by
// default; the bytes are counted before each block is fetched, the
// blocks as links are read), which bounds what a message naming a
// gigantic tree can make it fetch or hold. The whole tree is then written
// out by the [scheduler.Local] engine it runs, as in the scheduler's own
// process.
//
// Why the Object Store and not a have/want exchange: a worker still
// cannot ask its engine anything (above), so an engine need not serve
// requests, and a want list from a worker (of any size) is nothing an
// engine ever reads; the engine sends each block once whichever worker
// takes the invocation, the server keeps it for every worker, and the
// bytes an engine sends for a node depend only on which blocks are new,
// not on which worker took it. The price: one object (a meta message and
// its chunks) per block, so a tree of many small files costs a round
// trip per new block the first time; blocks are not bundled. Block
// objects are not deleted when an invocation ends (other invocations and
// engines use them): the bucket's TTL removes them.
//
// # Verification
//
// A worker verifies every package block against its CID
// ([cas.NewBlockWithCID]) before it writes anything: a tampered message
// is refused (terminated, and its engine told why with an "error"
// reply). The package is unpacked with [cas.GetTree] from the package CID
// and loaded with [haygent.Load], once per package CID for the life of
// [Serve]. Workspace blocks are verified as they arrive (above). The
// engine verifies every outcome block the same way before the scheduler
// sees it, and the scheduler then verifies the receipt.
//
// # Delivery, failures and time limits
//
// A worker takes a message only when one of its Jobs slots is free, keeps
// it alive with progress acks while it runs, publishes the outcome to
// the results stream (a JetStream publish, stored before it is
// acknowledged; a try without an answer within 3 seconds, as when a
// server goes down under it, is made again under the same message id for
// up to 30 seconds), and only then acks the message (a plain ack: the
// worker does not wait for the server to confirm it, as the engine
// takes the answered invocation off the queue itself, below). An invocation that
// cannot be carried out is answered with an error and terminated. A
// message the worker cannot answer (it is stopping, or the publish
// failed) is handed back, and a worker that dies lets its ack wait run
// out; either way the message is redelivered, at most MaxDeliver times
// in all, after which the server's max-deliveries advisory fails the
// invocation at the engine. Once the engine has an outcome, it makes sure
// the invocation leaves the queue: one whose ack was lost (its worker
// died right after answering, a failover dropped the ack) is not handed
// out and run again after its acceptance. Every second it asks the work
// stream once which answered invocations it still holds and deletes
// those answered over 2 seconds before (the worker's own ack has removed
// the others), and at Close all it still holds: one request a second,
// not one an invocation, and well inside the ack wait. A member a worker
// queued again on its own (below) is not the engine's message and is
// not swept: should its ack be lost, the want question keeps it from
// running again for as long as its engine answers.
//
// A worker's AckWait is 15 seconds by default ([WorkerOptions.AckWait]),
// kept alive by progress acks every AckWait/3: a worker that is killed
// (SIGKILL, a machine lost) holds its invocation for at most that long
// before the server hands it to another.
//
// [Options.Timeout] (10 minutes by default) bounds each invocation from
// publication to outcome. The error of one that times out names the
// cause: the server unreachable for N of the last M seconds (the engine
// follows its connection), no worker consuming, a worker that took it
// and went silent, or one still heard from but without an outcome.
//
// # What the engine says while it waits
//
// [Options.Notify] is told, as a [Notice]: that the engine lost the
// server (it reconnects; the caller's connection should never stop
// trying: nats.MaxReconnects(-1), as hg does) and regained it; that an
// invocation has waited [Options.NoWorkerAfter] (5 seconds) untaken and
// twice in a row the workers' consumer had no pull waiting and no
// message pending (or does not exist): no worker consumes, said once
// until a worker takes something; that the worker that took an
// invocation sent nothing (no notice, no heartbeat) for
// [Options.Silence] (10 seconds) while the engine was connected, so
// the invocation waits for redelivery; and that another worker took it
// then. An invocation made while the server is away is published once
// it is back (the message id makes a retried publish a duplicate the
// server drops), until its deadline.
//
// A server without JetStream is refused by [New] and [Serve] with
// [ErrNoJetStream]: start it with nats-server -js. When ctx
// ends or the timeout passes, the engine removes the message from the
// queue if it is still there and tells workers to stop it. The deadline
// travels in the message, so workers do not start what their engine gave
// up on; it assumes the clocks of engine and workers roughly agree.
//
// # Limits
//
// A worker unpacks packages in a directory of
// its own that it locks for its life ([cas.MkdirOwnedTemp]); on start
// it removes those that killed workers left in the same place.
//
// A worker reports what it does as [WorkerEvent]s ([WorkerOptions.Events]):
// connected, took, done, failed, refused, dropped, stopped, handed back,
// error, each with its time and the invocation's id, run and node.
//
// The memo key the scheduler computes names its own adapter, not the
// worker's. Unpacked packages are kept until Serve returns. Who may
// publish or subscribe on the subjects is NATS's business (accounts and
// permissions): anyone who can publish there can queue or cancel work,
// but no one can make a scheduler accept a receipt that a key it trusts
// did not sign.
package natsengine
