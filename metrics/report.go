package metrics

import (
	"slices"
	"time"
)

// Report is what [Compute] found: the runs it read, the metrics of the
// whole store, per Haygent and per Work Order class, and what could not be
// measured. Its JSON form is what hg metrics --json prints (SPEC.md).
type Report struct {
	// Since is the start of the period, RFC 3339; "" for every run.
	Since string `json:"since,omitempty"`
	// Trusted is how many keys receipts were verified against.
	Trusted  int            `json:"trusted_keys"`
	Runs     RunCounts      `json:"runs"`
	Total    Metrics        `json:"total"`
	Haygents []HaygentGroup `json:"haygents"` // by name, then package CID
	Classes  []ClassGroup   `json:"classes"`  // by class
	// NotMeasured lists the metrics the store holds no data for.
	NotMeasured []NotMeasured `json:"not_measured"`
}

// RunCounts says which runs a report covers.
type RunCounts struct {
	Listed  int `json:"listed"`  // refs runs/RUN in the store
	Counted int `json:"counted"` // read and in the period
	// BeforeSince counts the runs left out as started before Since;
	// NoStart those left out because their record gives no start time
	// that can be read (only when Since is set).
	BeforeSince int `json:"before_since"`
	NoStart     int `json:"no_start"`
	// Unreadable names the runs whose record or Work Order could not be
	// read: none of their receipts is counted.
	Unreadable []RunProblem `json:"unreadable"`
	// Unverified names the counted runs whose own checks (the record's
	// outcome, its events) failed, or that hold a receipt that is not its
	// node's work (not counted): their receipts count by their own
	// checks, but none of their events (regressions, withdrawals) or
	// re-measurements does, and no PASS they hold is one they stand
	// behind; and the regressed events not counted because they name a
	// receipt the run does not hold.
	Unverified []RunProblem `json:"unverified"`
}

// RunProblem is a run and what is wrong with it.
type RunProblem struct {
	Run    string `json:"run"`
	Check  string `json:"check,omitempty"`
	Detail string `json:"detail"`
}

// HaygentGroup is the metrics of one Haygent: its receipts in the
// counted runs, each counted once however many runs reuse it.
type HaygentGroup struct {
	// Haygent is the receipt's name@version; "" when no receipt of the
	// group could be read (Package is then the one the Work Order names).
	Haygent string `json:"haygent"`
	Package string `json:"package"` // the package tree's CID: the code version
	Metrics
}

// ClassGroup is the metrics of one Work Order class: its runs, and the
// distinct receipts they hold.
type ClassGroup struct {
	Class string `json:"class"`
	// Runs counts the class's runs; Done, Halted, Cancelled and Running
	// those whose recorded status the verifier establishes: done only
	// when every check of the run holds (hg verify), any other status
	// when the run's own checks hold and each receipt it holds is its
	// node's work. RunsUnverified counts the others, under no status.
	Runs           int `json:"runs"`
	Done           int `json:"runs_done"`
	Halted         int `json:"runs_halted"`
	Cancelled      int `json:"runs_cancelled"`
	Running        int `json:"runs_running"`
	RunsUnverified int `json:"runs_unverified"`
	// RunToVerified is, over the done runs whose every check holds, the
	// time from the run's start to the last acceptance of its done nodes
	// (both the scheduler's clock; a node taken from the memo cache was
	// accepted before, and counts as at once).
	RunToVerified Durations `json:"run_to_verified"`
	Metrics
}

// Metrics is one group's figures. Everything but Receipts and the
// Unverified counts is over verified receipts only.
type Metrics struct {
	Receipts   int `json:"receipts"`
	Verified   int `json:"verified"`
	Unverified int `json:"unverified"`
	// UnverifiedBy counts the unverified receipts by the first check
	// they fail.
	UnverifiedBy map[string]int `json:"unverified_by"`

	// Pass counts the verified PASS receipts a run stands behind: the
	// receipt of a done node in a run whose every check holds, that no
	// re-measurement regressed and no one withdrew. Halt counts the
	// verified HALT receipts.
	Pass int `json:"pass"`
	Halt int `json:"halt"`
	// Withdrawn counts the verified PASS receipts of nodes a person
	// withdrew (hg withdraw); PassNotHeld the other verified PASS
	// receipts, not regressed, that no run stands behind: of nodes
	// failed, blocked or rewritten, earlier attempts, or held only by
	// runs whose checks do not hold.
	Withdrawn   int `json:"withdrawn"`
	PassNotHeld int `json:"pass_not_held"`

	// FalsePass counts the PASS receipts hg recheck regressed on a check
	// of the receipt or its place in the run: work accepted that did not
	// hold. TrustWithdrawn counts those regressed only because their
	// signer is no longer trusted; ReplayDiverged those whose replay
	// (hg recheck --replay) did not agree.
	FalsePass      int `json:"false_pass"`
	TrustWithdrawn int `json:"trust_withdrawn"`
	ReplayDiverged int `json:"replay_diverged"`
	// Rechecked counts the receipts a recorded re-measurement measured
	// (it held or regressed; hg recheck records each, and a regressed
	// event is one); FalsePassRate is FalsePass over it, nil when 0.
	Rechecked     int      `json:"rechecked"`
	FalsePassRate *float64 `json:"false_pass_rate"`
	// Replayed counts the receipts hg recheck --replay replayed;
	// ReplayAgreed those whose every replay agreed; ReplayAgreement the
	// one over the other, nil when none was replayed.
	Replayed        int      `json:"replayed"`
	ReplayAgreed    int      `json:"replay_agreed"`
	ReplayAgreement *float64 `json:"replay_agreement"`

	// Denied counts the operations the permissions refused, over every
	// verified receipt; DeniedReceipts the receipts with one at least;
	// HaltsOnDenial the HALTs whose verdict is DENIED.
	Denied         int `json:"denied_operations"`
	DeniedReceipts int `json:"receipts_with_denials"`
	HaltsOnDenial  int `json:"halts_on_denial"`

	Repair   Repair      `json:"repair"`
	HaltInfo HaltQuality `json:"halt_quality"`

	// ToVerified is, over the verified PASS receipts a run accepted, the
	// time from the receipt's start (the runner's clock) to its
	// acceptance (the scheduler's). A pair that goes backwards (two
	// machines' clocks) is left out and counted in ClockSkew.
	ToVerified Durations `json:"to_verified"`
	ClockSkew  int       `json:"clock_skew"`
}

// Repair is repair convergence.
type Repair struct {
	// RepairsInPass sums the repair attempts of the PASS receipts;
	// PerPass is that over Pass, nil when there is no PASS.
	RepairsInPass int64    `json:"repairs_in_pass"`
	PerPass       *float64 `json:"repairs_per_pass"`
	FirstTry      int      `json:"pass_first_try"`
	AfterRepair   int      `json:"pass_after_repair"`
	// BudgetExhausted counts the HALTs on a failed gate whose repairs
	// reached the receipt's repair budget (one or more).
	BudgetExhausted int `json:"halts_budget_exhausted"`
}

// HaltQuality is how much the HALTs say, for the one who picks them up:
// each count is of HALTs whose receipt names the thing.
type HaltQuality struct {
	Halts        int `json:"halts"`
	Gate         int `json:"names_gate"`
	Evidence     int `json:"names_evidence"`
	RestartPoint int `json:"names_restart_point"`
	// Complete names all three. Attempts are a number every HALT
	// records (0 when no repair was tried).
	Complete int `json:"complete"`
}

// Durations summarises a list of durations, in milliseconds.
type Durations struct {
	Count    int   `json:"count"`
	MedianMS int64 `json:"median_ms"`
	MaxMS    int64 `json:"max_ms"`
}

// NotMeasured is a metric the store holds no data for, and why.
type NotMeasured struct {
	Metric string `json:"metric"`
	Reason string `json:"reason"`
}

// summarise returns the summary of ds (which it sorts). The median of an
// even count is the lower middle value.
func summarise(ds []time.Duration) Durations {
	if len(ds) == 0 {
		return Durations{}
	}
	slices.Sort(ds)
	return Durations{Count: len(ds), MedianMS: ds[(len(ds)-1)/2].Milliseconds(), MaxMS: ds[len(ds)-1].Milliseconds()}
}
