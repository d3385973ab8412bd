package scheduler

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/haygent/hg/cas"

	"github.com/haygent/hg/haygent"
)

// PlanFromStore rebuilds the plan of a run from the store alone: the stored
// Work Order and the package trees it names, written out to a temporary
// directory that cleanup removes. It is how a run resumes on a machine, or
// in a process, that never saw the Work Order file.
func PlanFromStore(ctx context.Context, st cas.Store, run string) (plan *Plan, rec *Record, cleanup func(), err error) {
	rec, _, err = LoadRecord(ctx, st, run)
	if err != nil {
		return nil, nil, nil, err
	}
	obj, wo, err := LoadWorkOrder(ctx, st, rec)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("run %s: work order: %w", run, err)
	}
	tmp, err := os.MkdirTemp("", "hg-resume-*")
	if err != nil {
		return nil, nil, nil, err
	}
	cleanup = func() { os.RemoveAll(tmp) }
	plan = &Plan{WorkOrder: wo, Packages: map[string]*haygent.Package{}, Dir: tmp}
	loaded := map[string]*haygent.Package{}
	for _, n := range obj.Nodes {
		key := n.Haygent.String()
		if p, ok := loaded[key]; ok {
			plan.Packages[n.Name] = p
			continue
		}
		dir := filepath.Join(tmp, key)
		if err := cas.GetTree(ctx, st, n.Haygent.Cid, dir, nil); err != nil {
			cleanup()
			return nil, nil, nil, fmt.Errorf("node %q: package %s: %w", n.Name, key, err)
		}
		p, err := haygent.Load(dir)
		if err != nil {
			cleanup()
			return nil, nil, nil, fmt.Errorf("node %q: %w", n.Name, err)
		}
		loaded[key] = p
		plan.Packages[n.Name] = p
	}
	return plan, rec, cleanup, nil
}
