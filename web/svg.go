package web

import (
	"fmt"
	"html"
	"html/template"
	"slices"
	"strings"

	"github.com/haygent/hg/dag"
)

// svgGraph is a run's DAG laid out for SVG: a column per wave (dag's
// topological levels), nodes in name order within it. Up to boxesUpTo
// nodes are drawn as named boxes with their edges; a larger run is drawn
// compact, a small square per node (its name and state in its title),
// cellsPerRow a row in wave order, without edges. Either
// way every node is drawn once, and the layout is linear in nodes and
// edges.
type svgGraph struct {
	W, H    int
	Compact bool
	Nodes   []svgNode
	Edges   []svgEdge
}

type svgNode struct {
	Name, State, Href string
	X, Y              int
	TX, TY            int // the label's place
	Label             string
}

type svgEdge struct{ X1, Y1, X2, Y2 int }

const (
	boxesUpTo      = 400
	boxW, boxH     = 150, 30
	colGap, rowGap = 50, 12
	margin         = 10
	maxLabel       = 20 // characters of a name shown in a box; the title has it whole
	cell, cellGap  = 10, 2
	cellsPerRow    = 100
)

// layout places the nodes of wo with their states; href gives each
// node's address. Nodes on no wave (a cycle, which a valid Work Order
// cannot hold) go in a last column, so none is left out.
func layout(wo *dag.WorkOrder, waves [][]string, states map[string]string, href func(string) string) svgGraph {
	placed := 0
	for _, w := range waves {
		placed += len(w)
	}
	if placed < len(wo.Nodes) {
		in := make(map[string]bool, placed)
		for _, w := range waves {
			for _, n := range w {
				in[n] = true
			}
		}
		var rest []string
		for _, n := range wo.Order {
			if !in[n] {
				rest = append(rest, n)
			}
		}
		slices.Sort(rest)
		waves = append(slices.Clip(waves), rest)
	}
	state := func(n string) string {
		if s, ok := states[n]; ok {
			return s
		}
		return "unknown"
	}
	g := svgGraph{Compact: len(wo.Nodes) > boxesUpTo}
	g.Nodes = make([]svgNode, 0, len(wo.Nodes))
	if g.Compact {
		// A grid of cellsPerRow squares a row, the nodes in wave order:
		// a chain of 10,000 is as compact as a fan-out of 10,000.
		i := 0
		for _, w := range waves {
			for _, n := range w {
				col, row := i%cellsPerRow, i/cellsPerRow
				g.Nodes = append(g.Nodes, svgNode{Name: n, State: state(n), Href: href(n),
					X: margin + col*(cell+cellGap), Y: margin + row*(cell+cellGap)})
				i++
			}
		}
		rows := (i + cellsPerRow - 1) / cellsPerRow
		g.W = 2*margin + min(i, cellsPerRow)*(cell+cellGap)
		g.H = 2*margin + rows*(cell+cellGap)
		return g
	}
	pos := make(map[string][2]int, len(wo.Nodes))
	for c, w := range waves {
		for i, n := range w {
			x, y := margin+c*(boxW+colGap), margin+i*(boxH+rowGap)
			pos[n] = [2]int{x, y}
			label := n
			if r := []rune(label); len(r) > maxLabel {
				label = string(r[:maxLabel-1]) + "…"
			}
			g.Nodes = append(g.Nodes, svgNode{Name: n, State: state(n), Href: href(n), X: x, Y: y, TX: x + 8, TY: y + boxH/2 + 5, Label: label})
			g.H = max(g.H, y+boxH+margin)
		}
		g.W = margin + (c+1)*(boxW+colGap) - colGap + margin
	}
	for _, name := range wo.Order {
		to, ok := pos[name]
		if !ok {
			continue
		}
		for _, need := range wo.Nodes[name].Needs {
			from, ok := pos[need]
			if !ok {
				continue
			}
			g.Edges = append(g.Edges, svgEdge{X1: from[0] + boxW, Y1: from[1] + boxH/2, X2: to[0], Y2: to[1] + boxH/2})
		}
	}
	return g
}

// svgHTML writes the graph as an SVG element, escaping every name and
// state with html.EscapeString (for text and for quoted attributes) and
// choosing classes only from stateClass. It is written here rather than
// by html/template, which took a second for 10,000 nodes; an address that
// is not a path of this server ("/...") is left out, never written.
func svgHTML(g svgGraph) template.HTML {
	var b strings.Builder
	b.Grow(200 + 160*len(g.Nodes) + 60*len(g.Edges))
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="the run&#39;s DAG">`, g.W, g.H, g.W, g.H)
	for _, e := range g.Edges {
		fmt.Fprintf(&b, `<line class="edge" x1="%d" y1="%d" x2="%d" y2="%d"/>`, e.X1, e.Y1, e.X2, e.Y2)
	}
	for _, n := range g.Nodes {
		name, state := html.EscapeString(n.Name), html.EscapeString(n.State)
		href := "#"
		if strings.HasPrefix(n.Href, "/") && !strings.HasPrefix(n.Href, "//") {
			href = html.EscapeString(n.Href)
		}
		if g.Compact {
			fmt.Fprintf(&b, "\n"+`<a href="%s"><rect class="cell %s" data-node="%s" x="%d" y="%d" width="%d" height="%d"><title>%s: %s</title></rect></a>`,
				href, stateClass(n.State), name, n.X, n.Y, cell, cell, name, state)
			continue
		}
		fmt.Fprintf(&b, "\n"+`<a href="%s"><g class="node %s" data-node="%s"><title>%s: %s</title><rect x="%d" y="%d" width="%d" height="%d" rx="4"/><text x="%d" y="%d">%s</text></g></a>`,
			href, stateClass(n.State), name, name, state, n.X, n.Y, boxW, boxH, n.TX, n.TY, html.EscapeString(n.Label))
	}
	b.WriteString("\n</svg>")
	return template.HTML(b.String())
}
