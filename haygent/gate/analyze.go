package gate

import (
	"slices"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
)

// outcomes is the set of results an expression can have: true, false, or
// anything else (an error, or a value that is not a bool). The analysis below
// over-approximates: a bit is cleared only when the AST proves the result
// impossible, so it never claims a predicate is constant when it is not.
type outcomes uint8

const (
	oTrue outcomes = 1 << iota
	oFalse
	oOther
	oAny = oTrue | oFalse | oOther
)

// analysis is what Lint learns from a checked predicate.
type analysis struct {
	readsAnyVar bool     // some identifier is read at all
	reads       []string // declared variables (ev, other) read, not shadowed
	out         outcomes
}

func analyze(a *cel.Ast, vars []string) analysis {
	nat := a.NativeRep()
	z := &analyzer{info: nat.SourceInfo()}
	root := nat.Expr()
	res := analysis{readsAnyVar: hasIdent(root), out: z.outcomes(root)}
	for _, v := range vars {
		if readsVar(root, v) {
			res.reads = append(res.reads, v)
		}
	}
	return res
}

type analyzer struct {
	info *celast.SourceInfo
}

// outcomes computes the possible results of e under CEL's semantics:
// && and || are commutative and absorb errors (true || error is true,
// false && error is false); the conditional propagates an error in its
// condition; comparisons of an expression with itself can only be one way or
// an error (Data may not hold NaN, which Evaluate refuses); subexpressions
// that read no identifier are constants and are evaluated.
func (z *analyzer) outcomes(e celast.Expr) outcomes {
	switch e.Kind() {
	case celast.LiteralKind:
		if b, ok := e.AsLiteral().(types.Bool); ok {
			if b {
				return oTrue
			}
			return oFalse
		}
		return oOther
	case celast.CallKind:
	default:
		return z.constant(e)
	}
	call := e.AsCall()
	args := call.Args()
	switch call.FunctionName() {
	case operators.LogicalNot:
		if len(args) == 1 {
			o := z.outcomes(args[0])
			r := o & oOther
			if o&oTrue != 0 {
				r |= oFalse
			}
			if o&oFalse != 0 {
				r |= oTrue
			}
			return r
		}
	case operators.LogicalOr, operators.LogicalAnd:
		if len(args) >= 1 {
			// For ||: "win" is true; for &&, false. The result is win if any
			// argument can win; lose if all can lose; other if some argument
			// can be other and the rest can be other or lose.
			win, lose := oTrue, oFalse
			if call.FunctionName() == operators.LogicalAnd {
				win, lose = oFalse, oTrue
			}
			var r outcomes
			allLose, allLoseOrOther, anyOther := true, true, false
			for _, a := range args {
				o := z.outcomes(a)
				if o&win != 0 {
					r |= win
				}
				if o&lose == 0 {
					allLose = false
				}
				if o&(lose|oOther) == 0 {
					allLoseOrOther = false
				}
				if o&oOther != 0 {
					anyOther = true
				}
			}
			if allLose {
				r |= lose
			}
			if allLoseOrOther && anyOther {
				r |= oOther
			}
			return r
		}
	case operators.Conditional:
		if len(args) == 3 {
			c := z.outcomes(args[0])
			var r outcomes
			if c&oTrue != 0 {
				r |= z.outcomes(args[1])
			}
			if c&oFalse != 0 {
				r |= z.outcomes(args[2])
			}
			if c&oOther != 0 {
				r |= oOther
			}
			return r
		}
	case operators.Equals, operators.LessEquals, operators.GreaterEquals,
		operators.NotEquals, operators.Less, operators.Greater:
		if len(args) == 2 && isPath(args[0]) && z.same(args[0], args[1]) {
			switch call.FunctionName() {
			case operators.Equals, operators.LessEquals, operators.GreaterEquals:
				return oTrue | oOther
			default:
				return oFalse | oOther
			}
		}
	}
	return z.constant(e)
}

// constant evaluates e if it reads no identifier; otherwise anything is
// possible.
func (z *analyzer) constant(e celast.Expr) outcomes {
	if hasIdent(e) {
		return oAny
	}
	src, err := cel.ExprToString(e, z.info)
	if err != nil {
		return oAny
	}
	es, err := celEnvs()
	if err != nil {
		return oAny
	}
	c, err := compileExpr(es.konst, src)
	if err != nil {
		// Not bool-typed (a constant int, say): it can only be "other".
		if ast, iss := es.konst.Compile(src); iss == nil || iss.Err() == nil {
			if ast.OutputType().Kind() != types.BoolKind && ast.OutputType().Kind() != types.DynKind {
				return oOther
			}
		}
		return oAny
	}
	v, err := c.eval(map[string]any{})
	switch {
	case err != nil:
		return oOther
	case v:
		return oTrue
	default:
		return oFalse
	}
}

// isPath reports whether e only reads evidence data: ev or other, a field of
// a path, or a path indexed by a literal. Such a value is never NaN (Evaluate
// refuses NaN in Data), so it always equals itself; a computed double might
// not (double("NaN"), 0.0/0.0), nor might a comprehension variable ranging
// over computed values. outcomes never descends into a comprehension, so an
// identifier it meets here is a declared variable, never a shadowing one.
func isPath(e celast.Expr) bool {
	switch e.Kind() {
	case celast.IdentKind:
		return e.AsIdent() == "ev" || e.AsIdent() == "other"
	case celast.SelectKind:
		return isPath(e.AsSelect().Operand())
	case celast.CallKind:
		c := e.AsCall()
		args := c.Args()
		return c.FunctionName() == operators.Index && len(args) == 2 &&
			isPath(args[0]) && args[1].Kind() == celast.LiteralKind
	}
	return false
}

// same reports whether a and b are the same expression, by their source form.
func (z *analyzer) same(a, b celast.Expr) bool {
	sa, err := cel.ExprToString(a, z.info)
	if err != nil {
		return false
	}
	sb, err := cel.ExprToString(b, z.info)
	return err == nil && sa == sb
}

// children lists the direct subexpressions of e.
func children(e celast.Expr) []celast.Expr {
	switch e.Kind() {
	case celast.CallKind:
		c := e.AsCall()
		var out []celast.Expr
		if c.IsMemberFunction() {
			out = append(out, c.Target())
		}
		return append(out, c.Args()...)
	case celast.SelectKind:
		return []celast.Expr{e.AsSelect().Operand()}
	case celast.ListKind:
		return e.AsList().Elements()
	case celast.MapKind:
		var out []celast.Expr
		for _, en := range e.AsMap().Entries() {
			if en.Kind() == celast.MapEntryKind {
				out = append(out, en.AsMapEntry().Key(), en.AsMapEntry().Value())
			}
		}
		return out
	case celast.StructKind:
		var out []celast.Expr
		for _, f := range e.AsStruct().Fields() {
			if f.Kind() == celast.StructFieldKind {
				out = append(out, f.AsStructField().Value())
			}
		}
		return out
	case celast.ComprehensionKind:
		c := e.AsComprehension()
		return []celast.Expr{c.IterRange(), c.AccuInit(), c.LoopCondition(), c.LoopStep(), c.Result()}
	}
	return nil
}

// hasIdent reports whether e reads any identifier (a variable or a
// comprehension's own).
func hasIdent(e celast.Expr) bool {
	if e.Kind() == celast.IdentKind {
		return true
	}
	return slices.ContainsFunc(children(e), hasIdent)
}

// inScope calls visit on every node of e where the variable name is in
// scope, that is, not shadowed by a comprehension variable of the same name.
func inScope(e celast.Expr, name string, visit func(celast.Expr)) {
	visit(e)
	if e.Kind() == celast.ComprehensionKind {
		c := e.AsComprehension()
		inScope(c.IterRange(), name, visit)
		inScope(c.AccuInit(), name, visit)
		if c.IterVar() != name && c.AccuVar() != name && !(c.HasIterVar2() && c.IterVar2() == name) {
			inScope(c.LoopCondition(), name, visit)
			inScope(c.LoopStep(), name, visit)
		}
		if c.AccuVar() != name {
			inScope(c.Result(), name, visit)
		}
		return
	}
	for _, ch := range children(e) {
		inScope(ch, name, visit)
	}
}

// readsVar reports whether e reads the variable name, not counting
// comprehension variables that shadow it.
func readsVar(e celast.Expr, name string) bool {
	found := false
	inScope(e, name, func(x celast.Expr) {
		if x.Kind() == celast.IdentKind && x.AsIdent() == name {
			found = true
		}
	})
	return found
}

// requiredFields lists, sorted, the fields of the variable name that e reads
// directly (name.f, name["f"]) but never tests for (has(name.f), "f" in
// name). Evaluate refuses Data that lacks one of them before evaluating, so
// that CEL's || and && cannot absorb the "no such key" error of a missing
// field into a PASS.
func requiredFields(e celast.Expr, name string) []string {
	isVar := func(x celast.Expr) bool { return x.Kind() == celast.IdentKind && x.AsIdent() == name }
	read, tested := map[string]bool{}, map[string]bool{}
	inScope(e, name, func(x celast.Expr) {
		switch x.Kind() {
		case celast.SelectKind:
			sel := x.AsSelect()
			if isVar(sel.Operand()) {
				if sel.IsTestOnly() {
					tested[sel.FieldName()] = true
				} else {
					read[sel.FieldName()] = true
				}
			}
		case celast.CallKind:
			c := x.AsCall()
			args := c.Args()
			if len(args) != 2 {
				return
			}
			switch c.FunctionName() {
			case operators.Index:
				if f, ok := stringLiteral(args[1]); ok && isVar(args[0]) {
					read[f] = true
				}
			case operators.In:
				if f, ok := stringLiteral(args[0]); ok && isVar(args[1]) {
					tested[f] = true
				}
			}
		}
	})
	var out []string
	for f := range read {
		if !tested[f] {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out
}

func stringLiteral(e celast.Expr) (string, bool) {
	if e.Kind() != celast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().(types.String)
	return string(s), ok
}
