package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/spf13/cobra"
)

func newApproveCmd(g *globals) *cobra.Command {
	var (
		valueFile, subject, keyFile string
		into, field                 string
		ttl                         time.Duration
		reject                      bool
	)
	cmd := &cobra.Command{
		Use:   "approve (--value FILE.json | --subject SHA256) [--for DURATION] [--key-file FILE] [--into INPUT.json]",
		Short: "sign an approval of a value, good for a while, for a Haygent's approval step",
		Long: `Print a signed approval (hg/approval@1, JSON) of a value: put it in a
Haygent's input where its approval step reads it. The subject is the sha256
of the value's JSON (--value FILE.json), or given as hex (--subject). The
approval is signed with the store's runner key, or with --key-file, and
counts only until it expires (--for, default 1h), only for that exact value,
and only if the Haygent's manifest lists the signer among its approvers.
FILE.json and INPUT.json are read as strictly as 'hg haygent run' reads
--input: a duplicate key or a number out of range is an error.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (valueFile == "") == (subject == "") {
				return usageError{errors.New("give exactly one of --value FILE.json and --subject SHA256")}
			}
			if valueFile != "" {
				v, err := readValue(valueFile)
				if err != nil {
					return err
				}
				subject = ledger.SubjectDigest(v)
			}
			if keyFile == "" {
				dir, err := locateStore(g.store)
				if err != nil {
					return err
				}
				keyFile = keyPath(dir)
			}
			key, err := ledger.LoadKey(keyFile)
			if err != nil {
				return err
			}
			decision := ledger.DecisionApprove
			if reject {
				decision = ledger.DecisionReject
			}
			a, err := ledger.NewApproval(key, subject, decision, time.Now(), ttl)
			if err != nil {
				return usageError{err}
			}
			if into != "" {
				return putApproval(into, field, a)
			}
			return g.ui.printJSON(a)
		},
	}
	cmd.Flags().StringVar(&valueFile, "value", "", "approve the value in `FILE.json`")
	cmd.Flags().StringVar(&subject, "subject", "", "approve the value whose JSON has this sha256 (`HEX`)")
	cmd.Flags().DurationVar(&ttl, "for", time.Hour, "how long the approval counts (`DURATION`)")
	cmd.Flags().StringVar(&keyFile, "key-file", "", "sign with the key in `FILE` instead of the store's runner key")
	cmd.Flags().BoolVar(&reject, "reject", false, "sign a rejection instead")
	cmd.Flags().StringVar(&into, "into", "", "set the approval as a field of the JSON object in `INPUT.json` instead of printing it")
	cmd.Flags().StringVar(&field, "field", "approval", "the `NAME` of that field")
	return cmd
}

// readValue reads the value to approve from the JSON file at path, as
// strictly as 'hg haygent run --input' reads an input (a duplicate key, a
// number out of range or invalid UTF-8 is refused, not resolved), and
// returns it as that input's value would be in the run state: the data
// model of [cas.FromJSON], int64 or *big.Int for integers. So the subject
// is the digest the approval step computes of the same value given as
// input, integers beyond 2^53 included.
func readValue(path string) (any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	v, err := cas.DecodePlainJSON(data)
	if err != nil {
		return nil, fmt.Errorf("value %s: %v", path, err)
	}
	return cas.FromJSON(v), nil
}

// putApproval sets field of the JSON object in path to a, replacing the
// file whole. The file is checked as strictly as 'hg haygent run --input'
// will read it: a duplicate key would otherwise be dropped here, changing
// the input in silence. The other fields keep their text, numbers as
// written.
func putApproval(path, field string, a *ledger.Approval) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if _, err := decodeJSONObject("into", path, data); err != nil {
		return err
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil || doc == nil {
		return fmt.Errorf("into %s: want one JSON object", path)
	}
	if doc[field], err = json.Marshal(a); err != nil {
		return err
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(out, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
