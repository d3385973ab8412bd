package haygent

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/gate"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/workspace"
)

// callSlot asks the adapter for a proposal for slot name, verifies it, and
// on acceptance merges it into the adjustable fields. It re-asks with the
// errors up to the slot's limit, then takes the fallback: "keep" goes on
// with the current values, "halt" stops the run.
func (r *runner) callSlot(name, stepID, kind string) (map[string]any, *ledger.Halt, error) {
	slot := r.pkg.Manifest.Slots[name]
	rec, err := r.begin(Step{ID: stepID}, kind)
	if err != nil {
		return nil, nil, err
	}
	proj := map[string]any{}
	for _, ptr := range slot.Projection {
		if v, ok := pointerGet(r.state, ptr); ok {
			proj[ptr] = cloneValue(v)
		}
	}
	projLink, err := r.packet(proj, "projection")
	if err != nil {
		return nil, nil, err
	}
	prompt := r.pkg.Prompts[name]
	promptSum := sha256.Sum256([]byte(prompt))
	adapterName, model := "none", ""
	if r.opts.Adapter != nil {
		adapterName, model = r.opts.Adapter.Name(), r.opts.Adapter.Model()
	}
	if model == "" {
		model = slot.Model
	}
	rec.adapter = adapterName
	var errs []string
	var accepted map[string]any
	timedOut := false // the run's time limit cut the slot's calls short
	for try := 1; try <= slot.Limit && accepted == nil && !timedOut; try++ {
		call := ledger.SlotCall{Type: ledger.TypeSlotCall, Slot: name, Adapter: adapterName, Model: model, Try: int64(try),
			PromptDigest: "sha256:" + hex.EncodeToString(promptSum[:]), Projection: projLink, Errors: []string{}}
		var raw []byte
		if r.opts.Adapter == nil {
			err = errors.New("no adapter configured for slots")
		} else {
			raw, err = r.opts.Adapter.Propose(r.work, SlotRequest{Slot: name, Prompt: prompt, Projection: proj, Schema: r.pkg.AdjustRaw, Try: try, Errors: errs})
		}
		respLink, perr := r.putRaw(raw)
		if perr != nil {
			return nil, nil, perr
		}
		call.Response = respLink
		if err != nil {
			call.Verdict = ledger.SlotError
			errs = []string{err.Error()}
			// Once the run's time is up every further try fails the same
			// way: the slot ran out of time, no proposal was rejected.
			timedOut = r.work.Err() != nil
		} else if prop, verr := r.verifyProposal(slot, raw); verr != nil {
			call.Verdict = ledger.SlotRejected
			errs = verr
		} else {
			call.Verdict = ledger.SlotAccepted
			pl, err := r.packet(prop, AdjustSchema)
			if err != nil {
				return nil, nil, err
			}
			call.Proposal = &pl
			accepted = prop
			errs = nil
		}
		call.Errors = append(call.Errors, errs...)
		link, err := r.put(&call)
		if err != nil {
			return nil, nil, err
		}
		rec.slotCalls = append(rec.slotCalls, link)
		r.slotCalls = append(r.slotCalls, link)
	}
	if timedOut {
		if cerr := r.ctx.Err(); cerr != nil {
			return nil, nil, cerr // the caller gave up on the run: no receipt
		}
	}
	var halt *ledger.Halt
	switch {
	case timedOut:
		rec.status = ledger.StepHalted
		rec.note = "run time limit of " + r.pkg.Manifest.Timeouts.Run + " reached during slot " + name + ": " + strings.Join(errs, "; ")
		halt = &ledger.Halt{Verdict: string(gate.Timeout), Reason: "run time limit of " + r.pkg.Manifest.Timeouts.Run + " reached during slot " + name, RestartPoint: stepID}
	case accepted != nil:
		adj := r.state["adjustable"].(map[string]any)
		for k, v := range accepted {
			adj[k] = v
		}
	case slot.Fallback == "keep":
		rec.status = ledger.StepFallback
		rec.note = "no acceptable proposal; kept the current values: " + strings.Join(errs, "; ")
	default:
		rec.status = ledger.StepHalted
		rec.note = "no acceptable proposal after " + fmt.Sprint(slot.Limit) + " tries: " + strings.Join(errs, "; ")
		halt = &ledger.Halt{Verdict: ledger.HaltRejected, Reason: "slot " + name + ": " + rec.note, RestartPoint: stepID}
	}
	if err := r.record(rec); err != nil {
		return nil, nil, err
	}
	return accepted, halt, nil
}

// verifyProposal checks a raw response: one JSON object, only fields the
// adjustable schema declares, valid against it, and the slot verifier's
// own checks. It returns the errors to send back on a re-ask.
func (r *runner) verifyProposal(slot Slot, raw []byte) (map[string]any, []string) {
	// Strictly: a response with a key twice, or a number no value can
	// hold, means two things or nothing, and is refused (encoding/json
	// kept the last of two keys and rounded integers beyond 2^53).
	v, err := cas.DecodePlainJSON(raw)
	if err != nil {
		return nil, []string{fmt.Sprintf("the response is not one valid JSON object (%v): %s", err, firstLine(raw))}
	}
	prop, ok := v.(map[string]any)
	if !ok {
		return nil, []string{"the response must be a JSON object of adjustable fields"}
	}
	var errs []string
	props, _ := r.pkg.AdjustRaw["properties"].(map[string]any)
	var keys []string
	for k := range prop {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, ok := props[k]; !ok {
			errs = append(errs, fmt.Sprintf("field %q is not in the adjustable schema; only %s may be set", k, strings.Join(sortedKeys(props), ", ")))
		}
	}
	if err := validate(r.pkg.Adjustable, prop); err != nil {
		errs = append(errs, "schema: "+err.Error())
	}
	if slot.Verifier != nil {
		for _, field := range slot.Verifier.Files {
			p, _ := prop[field].(string)
			if p == "" {
				continue
			}
			err := r.needWorkspace()
			var ws *workspace.Workspace
			if err == nil {
				ws, err = workspace.Open(r.workspace, r.pkg.Permissions, r.opts.StoreDir)
			}
			if err == nil {
				_, err = ws.ReadFile(p)
				ws.Close()
			}
			if err != nil {
				errs = append(errs, fmt.Sprintf("field %q names %q, which is not a readable file: %v", field, p, err))
			}
		}
		for _, bad := range slot.Verifier.Forbid {
			if strings.Contains(string(raw), bad) {
				errs = append(errs, fmt.Sprintf("the proposal contains %q, which the verifier forbids", bad))
			}
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return cas.FromJSON(prop).(map[string]any), nil
}

func sortedKeys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
