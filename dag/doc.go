// Package dag reads, checks and lays out Work Orders: graphs of Haygent
// invocations whose outputs feed each other's inputs.
//
// A Work Order names an objective and a set of nodes. Each node invokes one
// Haygent package; its "needs" are the nodes that must be done before it may
// start, and its input may take values from the output of those nodes. This
// package knows nothing about running Haygents (it imports neither haygent
// nor the scheduler): it parses, validates, orders and stores the graph, and
// defines the node states and the moves between them. The scheduler
// resolves packages, runs nodes and moves their states.
//
// # The file
//
//	{
//	  "workorder": "release-check",
//	  "objective": "build, test and package the demo service",
//	  "nodes": {
//	    "build": {"haygent": "../haygents/build", "input": {"target": "./..."}},
//	    "test":  {"haygent": "../haygents/gotest", "needs": ["build"],
//	              "input": {"tree": {"from": "build", "pointer": "/tree"}}},
//	    "pack":  {"haygent": "../haygents/pack", "needs": ["test"]}
//	  },
//	  "outcome": {"require": ["pack"]}
//	}
//
// The document is one JSON object, decoded strictly by [Parse]: keys are
// matched exactly (case included); unknown keys, duplicate keys at any
// depth (duplicate node names in particular, which encoding/json would
// silently collapse), null where a string, array or object is expected,
// invalid UTF-8, nesting deeper than [MaxDepth] and data after the object
// are refused. The keys are:
//
//	workorder  required; the Work Order's name, written like a node name
//	objective  required; a non-empty sentence saying what the work is for
//	nodes      required; an object from node name to node
//	outcome    optional; {"require": [NODE, ...]}: the nodes whose success
//	           is the Work Order's success. Absent or empty, every node is
//	           required (see WorkOrder.Required).
//	max_attempts  optional; 1 to 100: how many times the scheduler may start
//	           a node of the order, over every resume and retry of a run,
//	           before the node's circuit breaker opens
//
// A node name matches [A-Za-z0-9][A-Za-z0-9_.-]{0,63}. A node has:
//
//	haygent    required; the path of a Haygent package directory, with
//	           slashes, relative to the directory of the Work Order file
//	           (an absolute path is taken as is)
//	needs      optional; names of the nodes this one waits for
//	input      optional; a JSON object, the node's input document
//	workspace  optional; the tree the node's Haygent works on (below);
//	           without it, a new empty directory
//
// Nodes keep the order in which they are written ([WorkOrder.Order]), so
// everything printed from a Work Order is stable.
//
// # References and the pointer convention
//
// Input values are literal JSON, read as the DAG-JSON data model
// ([cas.DecodeJSON]: integers are int64, numbers with a fraction or an
// exponent float64; DAG-JSON links and bytes are refused), except that an
// object with exactly the two keys "from" and "pointer", both strings, is a
// reference ([Ref]), at any depth of the input:
//
//	{"from": "build", "pointer": "/tree"}
//
// means "the value at /tree in the output document of node build". The
// output document is the payload of the output packet of the upstream
// node's accepted (PASS) receipt: the document the upstream Haygent's
// output contract (contracts/output.schema.json) describes. The pointer
// (RFC 6901) is relative to that document, so it is "/tree", never
// "/output/tree": the run state's /output is what becomes the payload, and
// the other parts of the run state (/input, /steps, /adjustable) are never
// visible downstream. The empty pointer "" takes the whole output document.
//
// "from" must be one of the node's needs, so data only flows along edges
// the graph already orders. There is no escape for an input object that
// literally has the keys "from" and "pointer" and nothing else: wrap it in
// another key, or add a third key, if such data must be passed.
//
// [ParsePointer] parses a pointer, [Lookup] evaluates one over a data-model
// document, and [Node.Resolve] builds a node's input with every reference
// replaced by its value.
//
// # Workspaces
//
// A node's "workspace" ([Workspace]) is one of:
//
//	"../workspaces/calc"   a directory, relative to the Work Order file
//	{"tree": "bafy..."}    a tree in the store, by its CID
//	{"pin": "calc"}        the tree a pin of the store names
//	{"from": "fix"}        the final workspace of node fix, which must be
//	                       among the node's needs
//
// The last is an edge like a reference: it carries the CID of the tree the
// upstream node's accepted receipt records as its final workspace, and
// nothing else, so downstream work starts from exactly what was accepted.
// A directory is stored and a pin resolved when a run starts: the stored
// Work Order names every workspace by its tree or its upstream node
// ([ObjectWorkspace]), so a run is reproducible from the store, or a
// bundle, alone.
//
// # Validation
//
// [WorkOrder.Validate] reports every problem at once, as [*FieldError]
// values joined with [errors.Join], each wrapping [ErrInvalid]:
//
//	field "nodes": no nodes
//	node "build": field "haygent": no valid Haygent package at "../haygents/build": ...
//	node "test": field "needs": unknown node "buidl"
//	node "test": field "needs": depends on itself
//	node "test": field "needs": "build" listed twice
//	node "test": field "input/tree": "from" node "lint" is not in needs
//	node "test": field "input/tree": pointer "tree": must be empty or start with "/"
//	node "test": field "input/tree": pointer "/trees": not declared by the output contract of node "build"
//	node "check": field "workspace/from": "fix" is not in needs: a workspace flows only along a needs edge
//	node "a": field "needs": cycle a -> b -> c -> a
//	field "outcome/require": unknown node "pakc"
//
// A [FieldError] names the node (empty for the document) and the field: a
// path of JSON Pointer segments relative to the node object (or to the
// document), without the leading slash, such as "needs" or "input/tree".
// [Problems] lists the FieldErrors inside an error.
//
// A cycle is written in the direction of "needs": "a -> b" reads "a needs
// b". Each strongly connected group of nodes is reported by the shortest
// cycles through its nodes, until every node of the group appears in one;
// each cycle starts and ends at its lexicographically smallest node and is
// reported on that node. At most 32 cycles are listed; one more problem,
// `field "nodes": N more nodes lie on cycles not listed here`, counts the
// rest. A node that needs itself is reported as "depends on itself", not
// as a cycle.
//
// Haygents are checked through a [Resolver]: the package must exist, and
// every pointer of a reference must name a field the upstream package's
// output contract declares. [SchemaResolver] answers from the output
// schemas: a field is declared when "properties" (for object members),
// "prefixItems" or "items" (for array indices) reach it, directly or in a
// branch of "allOf", "anyOf" or "oneOf". "additionalProperties",
// "patternProperties" and "$ref" declare nothing: a pointer must follow
// names the contract spells out.
//
// # Graph
//
// [WorkOrder.Waves] gives the topological levels (Kahn's algorithm): wave 0
// holds the nodes with no needs, wave k the nodes whose needs all lie in
// earlier waves, names sorted within a wave. [WorkOrder.Upstream] and
// [WorkOrder.Downstream] give a node's direct needs and everything that
// depends on it, transitively. [WorkOrder.Dot] draws the graph for
// Graphviz, nodes coloured by state.
//
// # Node states
//
// A node is in one of ten states; [CanMove] is the whole transition
// table of the scheduler:
//
//	pending    waiting for its needs                     -> ready, blocked, cancelled
//	ready      every need is done; may start             -> active, blocked, cancelled
//	active     its Haygent is running                    -> concluded, failed, cancelled
//	concluded  the invocation ended with a receipt that   -> done, failed, cancelled
//	           has not yet been checked and accepted
//	done       the receipt was accepted (PASS, verified); final
//	           its output feeds the nodes downstream
//	blocked    it will never run: a node upstream failed  final
//	           or was cancelled, or the scheduler stopped
//	           starting nodes
//	failed     the receipt is a HALT, or the invocation   final
//	           could not run, or its receipt was refused
//	cancelled  the Work Order was stopped                 final
//	rewritten  its work was superseded by a later          final
//	           accepted receipt, which a person named
//	deleted    withdrawn by a person, who said why         final
//
// Concluded is not done: a receipt exists, but its status, signature and
// output have not been accepted yet, so nothing downstream may read it.
//
// [CanReopen] is the table of the moves only an event recorded in the run
// makes, outside the scheduler: done -> failed when a re-measurement no
// longer holds (hg recheck), done -> blocked when something it needs
// moved back, and -> rewritten or -> deleted by a person. A retry (hg
// resume --retry) starts failed and blocked nodes again from pending.
//
// # Stored form
//
// [WorkOrder.Object] builds the hg/workorder@1 object ([Object]), the form
// a Work Order is stored in: nodes sorted by name, each naming its
// Haygent by the CID of the package's hg/tree@1 (the code version, as in
// receipts) instead of a path, its workspace by a tree's CID or an
// upstream node (left out when it has none), needs and the outcome's
// require list sorted and without duplicates, inputs as data-model maps
// with references kept as they are written. It round-trips through [cas.Marshal] and
// [cas.Unmarshal]. [FromObject] turns a stored object back into a
// [WorkOrder] for Waves, Dot and the like.
package dag
