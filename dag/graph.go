package dag

import (
	"slices"
	"strings"
)

// edges returns, for every node, its needs that are other known nodes,
// sorted and without duplicates. Unknown names and self-dependencies,
// which Validate reports, are left out.
func (w *WorkOrder) edges() map[string][]string {
	out := make(map[string][]string, len(w.Nodes))
	for name, n := range w.Nodes {
		var needs []string
		for _, d := range n.Needs {
			if d != name && w.Nodes[d] != nil {
				needs = append(needs, d)
			}
		}
		slices.Sort(needs)
		out[name] = slices.Compact(needs)
	}
	return out
}

// Upstream returns the direct needs of node, sorted and without
// duplicates, or nil if there is no such node.
func (w *WorkOrder) Upstream(node string) []string {
	n := w.Nodes[node]
	if n == nil || len(n.Needs) == 0 {
		return nil
	}
	up := slices.Clone(n.Needs)
	slices.Sort(up)
	return slices.Compact(up)
}

// Downstream returns every node that depends on node, directly or
// transitively, sorted; node itself is left out even when it lies on a
// cycle. It returns nil if there is no such node or nothing depends on it.
func (w *WorkOrder) Downstream(node string) []string {
	if w.Nodes[node] == nil {
		return nil
	}
	dependents := map[string][]string{}
	for name, needs := range w.edges() {
		for _, d := range needs {
			dependents[d] = append(dependents[d], name)
		}
	}
	seen := map[string]bool{node: true}
	queue := []string{node}
	var out []string
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, d := range dependents[cur] {
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
				queue = append(queue, d)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Waves returns the topological levels of the graph (Kahn's algorithm):
// the first wave holds the nodes without needs, each later wave the nodes
// whose needs all lie in earlier waves; names are sorted within a wave.
// Nodes that lie on a cycle, need themselves, or depend on such a node
// appear in no wave; unknown needs are ignored. Validate first.
func (w *WorkOrder) Waves() [][]string {
	edges := w.edges()
	indeg := map[string]int{}
	dependents := map[string][]string{}
	for name, needs := range edges {
		indeg[name] = len(needs)
		for _, d := range needs {
			dependents[d] = append(dependents[d], name)
		}
	}
	for _, name := range w.Order {
		if slices.Contains(w.Nodes[name].Needs, name) {
			indeg[name]++ // never ready
		}
	}
	var wave []string
	for _, name := range w.Order {
		if indeg[name] == 0 {
			wave = append(wave, name)
		}
	}
	var waves [][]string
	for len(wave) > 0 {
		slices.Sort(wave)
		waves = append(waves, wave)
		var next []string
		for _, n := range wave {
			for _, d := range dependents[n] {
				indeg[d]--
				if indeg[d] == 0 {
					next = append(next, d)
				}
			}
		}
		wave = next
	}
	return waves
}

// maxCycles bounds the cycles Validate reports, so that a hostile Work
// Order cannot make it search for long: each costs a breadth-first search.
const maxCycles = 32

// cycles finds the cycles to report: within each strongly connected group
// of two or more nodes (groups taken in the order of their smallest node),
// the shortest cycle through each node not yet on a reported one, visiting
// the nodes in sorted order, until maxCycles are found. Each cycle is
// rotated to start at its smallest node and ends where it starts; the list
// is sorted. more counts the nodes on cycles that no reported cycle shows.
func (w *WorkOrder) cycles() (out [][]string, more int) {
	edges := w.edges()
	var groups [][]string
	for _, comp := range components(w.Order, edges) {
		if len(comp) >= 2 {
			slices.Sort(comp)
			groups = append(groups, comp)
		}
	}
	slices.SortFunc(groups, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	seen := map[string]bool{}
	for _, comp := range groups {
		in := map[string]bool{}
		for _, n := range comp {
			in[n] = true
		}
		covered := map[string]bool{}
		for _, start := range comp {
			if covered[start] {
				continue
			}
			if len(out) == maxCycles {
				more++
				continue
			}
			c := shortestCycle(start, edges, in)
			for _, n := range c {
				covered[n] = true
			}
			key := strings.Join(c, " ")
			if !seen[key] {
				seen[key] = true
				out = append(out, c)
			}
		}
	}
	slices.SortFunc(out, func(a, b []string) int { return slices.Compare(a, b) })
	return out, more
}

// shortestCycle returns the shortest cycle from start back to start within
// the nodes in, following edges in sorted order, rotated to begin at its
// smallest node and closed (first node repeated at the end). start lies in
// a strongly connected group of two or more nodes, so a cycle exists.
func shortestCycle(start string, edges map[string][]string, in map[string]bool) []string {
	parent := map[string]string{start: ""}
	queue := []string{start}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, d := range edges[cur] {
			if !in[d] {
				continue
			}
			if d == start {
				var path []string
				for n := cur; n != ""; n = parent[n] {
					path = append(path, n)
				}
				slices.Reverse(path) // start ... cur
				lo := 0
				for i, n := range path {
					if n < path[lo] {
						lo = i
					}
				}
				c := append(slices.Clone(path[lo:]), path[:lo]...)
				return append(c, c[0])
			}
			if _, ok := parent[d]; !ok {
				parent[d] = cur
				queue = append(queue, d)
			}
		}
	}
	return nil
}

// components returns the strongly connected components of the graph
// (Tarjan's algorithm, iterative so that a long chain cannot exhaust the
// stack), visiting nodes in the given order.
func components(order []string, edges map[string][]string) [][]string {
	index := map[string]int{}
	low := map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var comps [][]string
	next := 0

	type frame struct {
		node string
		i    int // next edge to look at
	}
	for _, root := range order {
		if _, ok := index[root]; ok {
			continue
		}
		call := []frame{{node: root}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			if f.i < len(edges[f.node]) {
				d := edges[f.node][f.i]
				f.i++
				if _, ok := index[d]; !ok {
					index[d], low[d] = next, next
					next++
					stack = append(stack, d)
					onStack[d] = true
					call = append(call, frame{node: d})
				} else if onStack[d] {
					low[f.node] = min(low[f.node], index[d])
				}
				continue
			}
			n := f.node
			call = call[:len(call)-1]
			if len(call) > 0 {
				p := call[len(call)-1].node
				low[p] = min(low[p], low[n])
			}
			if low[n] == index[n] {
				var comp []string
				for {
					top := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[top] = false
					comp = append(comp, top)
					if top == n {
						break
					}
				}
				comps = append(comps, comp)
			}
		}
	}
	return comps
}
