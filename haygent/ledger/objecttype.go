package ledger

func TypeOf(v any) string {
	switch x := v.(type) {
	case *Receipt:
		return x.Type
	case *Transition:
		return x.Type
	case *Evidence:
		return x.Type
	case *GateResult:
		return x.Type
	case *SlotCall:
		return x.Type
	case *Packet:
		return x.Type
	}
	return ""
}
