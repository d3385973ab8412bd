package dag

import (
	"strings"
)

// stateColors are the Graphviz (X11 scheme) fill colours of node states.
var stateColors = map[string]string{
	Pending:   "grey",
	Ready:     "lightblue",
	Active:    "yellow",
	Concluded: "orange",
	Done:      "green",
	Blocked:   "red",
	Failed:    "darkred",
	Cancelled: "lightgrey",
	Rewritten: "lightyellow",
	Deleted:   "black",
}

// Dot renders the Work Order as a Graphviz digraph: one box per node, in
// written order, labelled with its name and state and filled with the
// state's colour (pending grey, ready lightblue, active yellow, concluded
// orange, done green, blocked red, failed darkred, cancelled lightgrey,
// rewritten lightyellow, deleted black; an unknown state white), then one edge need -> node per need, nodes in
// written order and needs sorted. A node missing from states is pending.
// The output depends on nothing but its arguments.
func (w *WorkOrder) Dot(states map[string]string) string {
	var b strings.Builder
	b.WriteString("digraph " + dotQuote(w.Name) + " {\n")
	b.WriteString("\trankdir=LR;\n")
	b.WriteString("\tnode [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\"];\n")
	for _, name := range w.Order {
		state, ok := states[name]
		if !ok {
			state = Pending
		}
		color, ok := stateColors[state]
		if !ok {
			color = "white"
		}
		b.WriteString("\t" + dotQuote(name) + " [label=" + dotQuote(name+"\n"+state) + ", fillcolor=" + dotQuote(color))
		if state == Failed || state == Deleted {
			b.WriteString(", fontcolor=\"white\"")
		}
		b.WriteString("];\n")
	}
	edges := w.edges()
	for _, name := range w.Order {
		for _, d := range edges[name] {
			b.WriteString("\t" + dotQuote(d) + " -> " + dotQuote(name) + ";\n")
		}
	}
	b.WriteString("}\n")
	return b.String()
}

// dotQuote writes s as a Graphviz quoted string; a newline becomes the
// \n line break of labels.
func dotQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", "")
	return `"` + r.Replace(s) + `"`
}
