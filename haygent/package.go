package haygent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/gate"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/perm"
	"github.com/haygent/hg/internal/textsafe"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Files of a Haygent package, relative to its directory.
const (
	ManifestFile    = "haygent.manifest.json"
	PermissionsFile = "permissions.json"
	InputSchema     = "contracts/input.schema.json"
	OutputSchema    = "contracts/output.schema.json"
	AdjustSchema    = "contracts/adjustable.schema.json"
	SpineFile       = "spine/spine.json"
	GatesFile       = "gates/gates.json"
)

// ErrBadPackage is wrapped by every error about a package's contents.
var ErrBadPackage = errors.New("bad Haygent package")

// Manifest is haygent.manifest.json.
type Manifest struct {
	Name         string          `json:"name"`
	Version      string          `json:"version"`
	Objective    string          `json:"objective"`
	Stakes       string          `json:"stakes"`        // low, medium, high
	RepairBudget int             `json:"repair_budget"` // repair attempts after the first pass; 0 means none
	Timeouts     Timeouts        `json:"timeouts"`
	Slots        map[string]Slot `json:"slots"`
	Repair       *Repair         `json:"repair,omitempty"`
	// Approvers are the keys (ed25519:...) whose approvals the approval
	// step counts; with none, no approval counts.
	Approvers []string `json:"approvers,omitempty"`
	// Isolation "required" means exec steps never run without their whole
	// confinement, whatever the runner allows (--allow-unisolated).
	Isolation string `json:"isolation,omitempty"`
	// MaxAttempts (1 to 100) is how many times a Work Order's scheduler
	// may start a node running this package, over every resume and retry
	// of its run, before the node's circuit breaker opens; 0 leaves it to
	// the Work Order or the scheduler's default.
	MaxAttempts int `json:"max_attempts,omitempty"`
}

// Timeouts bound a step and a whole invocation (Go durations).
type Timeouts struct {
	Step string `json:"step"`
	Run  string `json:"run"`
}

// Slot declares an intelligence slot: where a model may propose values for
// the fields of adjustable.schema.json, and nothing else.
type Slot struct {
	Prompt     string    `json:"prompt"`     // prompts/*.md
	Projection []string  `json:"projection"` // JSON pointers into the run state the slot may see
	Limit      int       `json:"limit"`      // tries per call, re-asking with the error; at least 1
	Verifier   *Verifier `json:"verifier"`   // required: a slot without one is refused
	Fallback   string    `json:"fallback"`   // "halt" or "keep" (keep the current values)
	Model      string    `json:"model,omitempty"`
}

// Verifier lists the checks beyond the adjustable schema that a proposal
// must pass. The runtime always refuses fields outside the schema.
type Verifier struct {
	// Files names proposal fields whose values must be paths of existing
	// files the read grants allow.
	Files []string `json:"files,omitempty"`
	// Forbid lists substrings no string in the proposal may contain.
	Forbid []string `json:"forbid,omitempty"`
}

// Repair says which slot repairs which failed gates, and where the spine
// resumes after an accepted proposal.
type Repair struct {
	Slot      string   `json:"slot"`
	Gates     []string `json:"gates"`      // empty: any failed gate
	RerunFrom string   `json:"rerun_from"` // a step id
}

// Spine is spine/spine.json: the steps, in order.
type Spine struct {
	Steps []Step `json:"steps"`
}

// Step kinds.
const (
	StepExec    = "exec"
	StepBuiltin = "builtin"
	StepSlot    = "slot"
)

// Step is one step of the spine.
type Step struct {
	ID      string         `json:"id"`
	Kind    string         `json:"kind"`
	Command string         `json:"command,omitempty"` // exec: a run:command grant name
	Report  string         `json:"report,omitempty"`  // exec: parse stdout as go-test-json, junit, tap, or "FORMAT:path" for a file
	Secrets []string       `json:"secrets,omitempty"` // exec: granted secrets passed as environment variables
	Timeout string         `json:"timeout,omitempty"`
	Op      string         `json:"op,omitempty"`   // builtin
	Args    map[string]any `json:"args,omitempty"` // builtin
	Slot    string         `json:"slot,omitempty"` // slot
	// OnDenied is what a denied operation does to the run: "halt"
	// (default) or "continue" (recorded; the step fails).
	OnDenied string `json:"on_denied,omitempty"`
	// Outputs (exec) are globs of the files the step writes: its
	// evidence does not vouch for them, so a later change to them leaves
	// it fresh. Covers narrows what its evidence vouches for to the files
	// its globs match (default: every file).
	Outputs []string `json:"outputs,omitempty"`
	Covers  []string `json:"covers,omitempty"`
}

// Package is a loaded, compiled Haygent package.
type Package struct {
	Dir         string
	Manifest    Manifest
	Permissions *perm.Set
	Spine       Spine
	Gates       []*gate.Gate
	GateSpecs   []gate.Spec
	Input       *jsonschema.Schema
	Output      *jsonschema.Schema
	Adjustable  *jsonschema.Schema
	AdjustRaw   map[string]any // adjustable.schema.json as JSON
	Prompts     map[string]string
}

// Problem is one thing wrong with a package.
type Problem struct {
	File    string `json:"file"`
	Message string `json:"message"`
}

func (p Problem) String() string { return p.File + ": " + p.Message }

// ProblemsError is returned by [Load] when a package has problems.
type ProblemsError struct {
	Dir      string
	Problems []Problem
}

func (e *ProblemsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d problem(s)", e.Dir, len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("; " + p.String())
	}
	return b.String()
}

func (e *ProblemsError) Unwrap() error { return ErrBadPackage }

// Load reads, compiles and checks the package in dir. Every problem found
// is returned at once in a [*ProblemsError]: schemas that do not compile,
// gates that cannot fail, steps naming commands with no grant, slots with
// no verifier or limit, unknown step kinds.
func Load(dir string) (*Package, error) {
	p := &Package{Dir: dir, Prompts: map[string]string{}}
	var probs []Problem
	add := func(file, format string, args ...any) {
		// A message quotes names from the package: escaped, it prints as
		// one line of visible text.
		probs = append(probs, Problem{File: file, Message: textsafe.Escape(fmt.Sprintf(format, args...))})
	}
	readJSON := func(file string, v any) bool {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			add(file, "%v", trimPathErr(err))
			return false
		}
		// The strict parser first: encoding/json keeps the last of two
		// equal keys, so {"version": "1.0.0", "version": "2.0.0"} would
		// mean whatever the last one says.
		if _, err := cas.DecodePlainJSON(data); err != nil {
			add(file, "%v", err)
			return false
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			add(file, "%v", err)
			return false
		}
		return true
	}

	if readJSON(ManifestFile, &p.Manifest) {
		checkManifest(&p.Manifest, add)
	}
	if data, err := os.ReadFile(filepath.Join(dir, PermissionsFile)); err != nil {
		add(PermissionsFile, "%v", trimPathErr(err))
	} else if p.Permissions, err = perm.Parse(data); err != nil {
		add(PermissionsFile, "%v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	for _, s := range []struct {
		file string
		dst  **jsonschema.Schema
	}{{InputSchema, &p.Input}, {OutputSchema, &p.Output}, {AdjustSchema, &p.Adjustable}} {
		sch, raw, err := compileSchema(c, dir, s.file)
		if err != nil {
			add(s.file, "%v", err)
			continue
		}
		*s.dst = sch
		if s.file == AdjustSchema {
			p.AdjustRaw = raw
			checkAdjustable(raw, add)
		}
	}
	if readJSON(SpineFile, &p.Spine) {
		checkSpine(p, add)
		checkReportPaths(p, add)
		checkScopes(p, add)
	}
	if data, err := os.ReadFile(filepath.Join(dir, GatesFile)); err != nil {
		add(GatesFile, "%v", trimPathErr(err))
	} else if specs, err := gate.Parse(data); err != nil {
		add(GatesFile, "%v", err)
	} else {
		p.GateSpecs = specs
		for _, pr := range gate.Lint(specs) {
			add(GatesFile, "%s", pr.Error())
		}
		if len(specs) == 0 {
			add(GatesFile, "no gates: a Haygent without gates can never fail, so it can never PASS")
		}
		for _, s := range specs {
			g, err := gate.Compile(s)
			if err != nil {
				continue // Lint reported it
			}
			p.Gates = append(p.Gates, g)
		}
	}
	for name, s := range p.Manifest.Slots {
		if s.Prompt == "" {
			continue
		}
		text, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(path.Clean(s.Prompt))))
		if err != nil || !strings.HasPrefix(path.Clean(s.Prompt), "prompts/") {
			add(ManifestFile, "slot %q: prompt %q must be a readable file under prompts/", name, s.Prompt)
			continue
		}
		p.Prompts[name] = string(text)
	}
	checkNames(p, add)
	if len(probs) > 0 {
		return p, &ProblemsError{Dir: dir, Problems: probs}
	}
	return p, nil
}

func trimPathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %v", pe.Op, pe.Err)
	}
	return err
}

func compileSchema(c *jsonschema.Compiler, dir, file string) (*jsonschema.Schema, map[string]any, error) {
	data, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return nil, nil, trimPathErr(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, nil, err
	}
	url := "hg:///" + file
	if err := c.AddResource(url, doc); err != nil {
		return nil, nil, err
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, nil, err
	}
	defs, err := compileDefs(c, url, doc)
	if err != nil {
		return nil, nil, err
	}
	if cyc := refCycle(append([]*jsonschema.Schema{sch}, defs...)...); cyc != nil {
		return nil, nil, refCycleError(url, cyc)
	}
	raw, _ := doc.(map[string]any)
	return sch, raw, nil
}

func checkManifest(m *Manifest, add func(string, string, ...any)) {
	f := ManifestFile
	if m.Name == "" {
		add(f, "name is required")
	}
	if m.Objective == "" {
		add(f, "objective is required")
	}
	if !slices.Contains([]string{"low", "medium", "high"}, m.Stakes) {
		add(f, "stakes %q: want low, medium or high", m.Stakes)
	}
	if m.Isolation != "" && m.Isolation != IsolationRequired {
		add(f, "isolation %q: want %q or nothing", m.Isolation, IsolationRequired)
	}
	if m.RepairBudget < 0 || m.RepairBudget > 100 {
		add(f, "repair_budget %d: want 0 to 100", m.RepairBudget)
	}
	if m.MaxAttempts < 0 || m.MaxAttempts > 100 {
		add(f, "max_attempts %d: want 1 to 100, or nothing", m.MaxAttempts)
	}
	for i, k := range m.Approvers {
		if _, err := ledger.ParsePublicKey(k); err != nil {
			add(f, "approvers[%d]: %v", i, err)
		}
	}
	for _, d := range []struct{ name, v string }{{"timeouts.step", m.Timeouts.Step}, {"timeouts.run", m.Timeouts.Run}} {
		if dur, err := time.ParseDuration(d.v); err != nil || dur <= 0 {
			add(f, "%s %q: want a positive Go duration such as 60s", d.name, d.v)
		}
	}
	for name, s := range m.Slots {
		if s.Limit < 1 || s.Limit > 20 {
			add(f, "slot %q: limit %d: every slot needs a limit of 1 to 20 tries", name, s.Limit)
		}
		if s.Verifier == nil {
			add(f, "slot %q: no verifier: a slot's proposals must be checked beyond their schema", name)
		}
		if s.Fallback != "halt" && s.Fallback != "keep" {
			add(f, "slot %q: fallback %q: want halt or keep", name, s.Fallback)
		}
		if len(s.Projection) == 0 {
			add(f, "slot %q: empty projection: declare the fields the slot may see", name)
		}
		for _, ptr := range s.Projection {
			if !strings.HasPrefix(ptr, "/") {
				add(f, "slot %q: projection %q is not a JSON pointer", name, ptr)
			}
		}
	}
	if m.Repair != nil {
		if _, ok := m.Slots[m.Repair.Slot]; !ok {
			add(f, "repair: unknown slot %q", m.Repair.Slot)
		}
	}
	if m.RepairBudget > 0 && m.Repair == nil {
		add(f, "repair_budget %d but no repair section", m.RepairBudget)
	}
}

// checkAdjustable refuses an adjustable schema that is not a closed object:
// a model may only set declared fields.
func checkAdjustable(raw map[string]any, add func(string, string, ...any)) {
	if raw["type"] != "object" {
		add(AdjustSchema, `must be {"type": "object", ...}`)
	}
	if ap, ok := raw["additionalProperties"]; !ok || ap != false {
		add(AdjustSchema, `must set "additionalProperties": false: a proposal may set declared fields only`)
	}
	props, _ := raw["properties"].(map[string]any)
	for name := range props {
		switch strings.ToLower(name) {
		case "permissions", "grants", "deny", "commands", "status", "verdict", "pass":
			add(AdjustSchema, "field %q: a model may not set permissions or outcomes", name)
		}
	}
}

func checkSpine(p *Package, add func(string, string, ...any)) {
	f := SpineFile
	if len(p.Spine.Steps) == 0 {
		add(f, "no steps")
	}
	seen := map[string]bool{}
	for i, s := range p.Spine.Steps {
		where := fmt.Sprintf("step %d (%q)", i, s.ID)
		if why := checkIdent(s.ID, ""); why != "" {
			add(f, "%s: id %q %s", where, s.ID, why)
		}
		if seen[s.ID] {
			add(f, "%s: duplicate id", where)
		}
		seen[s.ID] = true
		if s.Timeout != "" {
			if d, err := time.ParseDuration(s.Timeout); err != nil || d <= 0 {
				add(f, "%s: timeout %q: want a positive Go duration", where, s.Timeout)
			}
		}
		if s.OnDenied != "" && s.OnDenied != "halt" && s.OnDenied != "continue" {
			add(f, "%s: on_denied %q: want halt or continue", where, s.OnDenied)
		}
		switch s.Kind {
		case StepExec:
			if s.Command == "" {
				add(f, "%s: exec step without a command", where)
			} else if p.Permissions != nil {
				if _, err := p.Permissions.Command(s.Command); err != nil {
					add(f, "%s: command %q has no run:command grant: %v", where, s.Command, err)
				}
			}
			if s.Report != "" {
				format, _, _ := strings.Cut(s.Report, ":")
				if !slices.Contains([]string{"go-test-json", "junit", "tap"}, format) {
					add(f, "%s: report %q: want go-test-json, junit or tap, optionally :path", where, s.Report)
				}
			}
			if p.Permissions != nil {
				for _, sec := range s.Secrets {
					if !p.Permissions.Check(perm.Op{Verb: "secret", Kind: "env", Target: sec}).Allowed {
						add(f, "%s: secret %q has no secret grant", where, sec)
					}
				}
			}
		case StepBuiltin:
			if _, ok := builtinOpNamed(s.Op); !ok {
				add(f, "%s: unknown builtin op %q (known: %s)", where, s.Op, strings.Join(builtinOpNames(), ", "))
			}
		case StepSlot:
			if _, ok := p.Manifest.Slots[s.Slot]; !ok {
				add(f, "%s: unknown slot %q", where, s.Slot)
			}
		default:
			add(f, "%s: unknown step kind %q (want exec, builtin or slot)", where, s.Kind)
		}
	}
	if r := p.Manifest.Repair; r != nil && r.RerunFrom != "" && !seen[r.RerunFrom] {
		add(ManifestFile, "repair: rerun_from %q is not a step", r.RerunFrom)
	}
}
