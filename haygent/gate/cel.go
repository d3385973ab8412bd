package gate

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
)

// MaxCost is the CEL runtime cost limit of one predicate evaluation
// (cel.CostLimit). A predicate that exceeds it stops with an error and the
// verdict is INVALID. One unit is roughly one CEL operation; a comprehension
// over a list of n elements costs about n times its body.
const MaxCost = 1_000_000

// MaxPredicateLen is the longest predicate, in Unicode code points, that
// compiles.
const MaxPredicateLen = 4096

// maxNodes bounds the expression nodes of one predicate after macro
// expansion.
const maxNodes = 1000

// envs holds the CEL environments, built once. They are immutable after
// construction and safe for concurrent use.
type envs struct {
	pred   *cel.Env // ev
	contra *cel.Env // ev, other
	konst  *cel.Env // no variables: folds constant subexpressions for Lint
}

var celEnvs = sync.OnceValues(func() (*envs, error) {
	dataMap := cel.MapType(cel.StringType, cel.DynType)
	base := []cel.EnvOption{
		cel.StdLib(),
		cel.ParserExpressionSizeLimit(MaxPredicateLen),
		cel.ExpressionNodeLimit(maxNodes),
		cel.RegexProgramSizeLimit(1000),
	}
	konst, err := cel.NewCustomEnv(base...)
	if err != nil {
		return nil, err
	}
	pred, err := konst.Extend(cel.Variable("ev", dataMap))
	if err != nil {
		return nil, err
	}
	contra, err := pred.Extend(cel.Variable("other", dataMap))
	if err != nil {
		return nil, err
	}
	return &envs{pred: pred, contra: contra, konst: konst}, nil
})

// compiled is one checked predicate and its program.
type compiled struct {
	ast   *cel.Ast
	prg   cel.Program
	needs map[string][]string // variable -> fields read and never tested with has()
}

// compileExpr parses, type-checks and plans src in env. The result type must
// be bool or dyn (a dyn result is checked at evaluation: non-bool is
// INVALID). vars are the variables whose required fields are recorded.
func compileExpr(env *cel.Env, src string, vars ...string) (*compiled, error) {
	if src == "" {
		return nil, errors.New("missing")
	}
	ast, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		return nil, fmt.Errorf("does not compile: %s", issues(iss))
	}
	switch t := ast.OutputType(); t.Kind() {
	case types.BoolKind, types.DynKind:
	default:
		return nil, fmt.Errorf("has type %s, want bool", cel.FormatCELType(t))
	}
	prg, err := env.Program(ast, cel.CostLimit(MaxCost))
	if err != nil {
		return nil, fmt.Errorf("cannot be planned: %v", err)
	}
	c := &compiled{ast: ast, prg: prg, needs: map[string][]string{}}
	for _, v := range vars {
		c.needs[v] = requiredFields(ast.NativeRep().Expr(), v)
	}
	return c, nil
}

// lacks returns the first field, in name order, that c reads from variable
// v and data does not have.
func (c *compiled) lacks(v string, data map[string]any) (string, bool) {
	for _, f := range c.needs[v] {
		if _, ok := data[f]; !ok {
			return f, true
		}
	}
	return "", false
}

// eval runs c with the given variables. ok is the boolean result when err is
// nil; a non-bool result is an error.
func (c *compiled) eval(vars map[string]any) (ok bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("internal error: %v", r)
		}
	}()
	out, _, err := c.prg.Eval(vars)
	if err != nil {
		return false, err
	}
	b, isBool := out.(types.Bool)
	if !isBool {
		return false, fmt.Errorf("result is %s, not bool", out.Type().TypeName())
	}
	return bool(b), nil
}

// issues formats CEL compile errors on one line: "line:column: message",
// joined by "; ", column 1-based.
func issues(iss *cel.Issues) string {
	var parts []string
	for _, e := range iss.Errors() {
		msg := strings.ReplaceAll(e.Message, "\n", " ")
		if e.Location != nil && e.Location.Line() > 0 {
			msg = fmt.Sprintf("%d:%d: %s", e.Location.Line(), e.Location.Column()+1, msg)
		}
		parts = append(parts, msg)
	}
	if len(parts) == 0 {
		return strings.ReplaceAll(iss.Err().Error(), "\n", " ")
	}
	return strings.Join(parts, "; ")
}
