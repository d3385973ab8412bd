package scheduler

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/haygent"
)

// Plan is a Work Order resolved against its Haygent packages, ready to run.
type Plan struct {
	WorkOrder *dag.WorkOrder
	Packages  map[string]*haygent.Package // by node
	Dir       string                      // the Work Order's directory
	// Decisions records how the clarifier bound the order's decision
	// slots, whose values [dag.WorkOrder.Bind] has put into the inputs;
	// Start stores it in the run record.
	Decisions []DecisionRec
}

// ErrInvalidWorkOrder is wrapped by every problem found before a run.
var ErrInvalidWorkOrder = errors.New("invalid Work Order")

// Load parses and validates the Work Order file and loads its packages.
// Nothing runs, and nothing is stored.
func Load(path string) (*Plan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	wo, err := dag.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	pkgs := map[string]*haygent.Package{}
	checked := map[string]bool{}
	res := dag.SchemaResolver(dir, func(d string) (map[string]any, error) {
		if !checked[d] {
			if _, err := haygent.Load(d); err != nil {
				return nil, err
			}
			checked[d] = true
		}
		raw, err := os.ReadFile(filepath.Join(d, haygent.OutputSchema))
		if err != nil {
			return nil, err
		}
		var schema map[string]any
		if err := jsonUnmarshal(raw, &schema); err != nil {
			return nil, err
		}
		return schema, nil
	})
	if err := wo.Validate(res); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := checkWorkspaceDirs(wo, dir); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	byDir := map[string]*haygent.Package{}
	for _, name := range wo.Order {
		n := wo.Nodes[name]
		pdir := n.Haygent
		if !filepath.IsAbs(pdir) {
			pdir = filepath.Join(dir, filepath.FromSlash(pdir))
		}
		pkg, ok := byDir[pdir]
		if !ok {
			if pkg, err = haygent.Load(pdir); err != nil {
				return nil, fmt.Errorf("node %q: %w", name, err)
			}
			byDir[pdir] = pkg
		}
		pkgs[name] = pkg
	}
	return &Plan{WorkOrder: wo, Packages: pkgs, Dir: dir}, nil
}
