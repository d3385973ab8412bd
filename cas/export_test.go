package cas

// For the tests of package cas_test.
var (
	UnmarshalReencode = unmarshalReencode
	HasPlan           = func(v any) bool { return planFor(v) != nil }
)
