package ledger

import (
	"time"
)

func Stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
