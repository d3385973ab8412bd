package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
	"github.com/spf13/cobra"
)

func newDagCmd(g *globals) *cobra.Command {
	return groupCmd("dag", "read and write structured blocks as DAG-JSON; draw Work Orders", newDagGetCmd(g), newDagPutCmd(g), newDagDotCmd(g))
}

func newDagGetCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "get CID|CID/PATH|PIN",
		Short: "print a block as DAG-JSON",
		Long: `Print a DAG-CBOR block as compact DAG-JSON ({"/": "bafy..."} for a link,
{"/": {"bytes": "..."}} for bytes), a raw block as a bytes value, or a dag-pb
block as kubo's 'ipfs dag get' does ({"Data": ..., "Links": [{"Hash", "Name",
"Tsize"}]}). A DAG-CBOR block that is not canonical, or a dag-pb block that
does not decode strictly, is refused with exit code 4.

CID/a/b follows names through hg trees and UnixFS directories, and keys and
list indexes through DAG-CBOR, following links; a path that ends inside a
block prints the value it reaches there.`,
		Args: exactArgs(1, "one CID or pin name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withStore(true, func(st cas.Store) error {
				res, isPath, err := resolvePath(cmd.Context(), st, args[0])
				if !isPath {
					res.CID, err = resolve(cmd.Context(), st, args[0])
				}
				if err != nil {
					return err
				}
				if res.InBlock {
					out, err := cas.EncodeJSON(res.Value)
					if err != nil {
						return err
					}
					g.ui.printf("%s\n", out)
					return nil
				}
				return printBlockJSON(cmd.Context(), g, st, res.CID)
			})
		},
	}
}

// printBlockJSON prints the block c as compact DAG-JSON: a DAG-CBOR block
// as its value, a raw block as a bytes value.
func printBlockJSON(ctx context.Context, g *globals, st cas.Store, c cid.Cid) error {
	var node any
	err := st.View(ctx, c, func(data []byte) error {
		switch c.Type() {
		case cas.DagCBOR:
			n, err := cas.DecodeNode(data)
			node = n
			return err
		case cas.Raw:
			node = append([]byte(nil), data...)
			return nil
		case cas.DagPB:
			n, err := dagPBValue(data)
			node = n
			return err
		default:
			return fmt.Errorf("%s: codec 0x%x cannot be shown as DAG-JSON (try 'hg block get')", c, c.Type())
		}
	})
	if err != nil {
		return err
	}
	out, err := cas.EncodeJSON(node)
	if err != nil {
		return err
	}
	g.ui.printf("%s\n", out)
	return nil
}

func newDagPutCmd(g *globals) *cobra.Command {
	var (
		inputCodec string
		pin        string
		force      bool
	)
	cmd := &cobra.Command{
		Use:   "put [FILE|-]",
		Short: "store DAG-JSON (or DAG-CBOR) as a canonical DAG-CBOR block; print its CID",
		Long: `Read one value as DAG-JSON (default) or, with --input-codec dag-cbor, as
DAG-CBOR, from FILE or standard input, and store it as a canonical DAG-CBOR
block. DAG-CBOR input must already be canonical (exit code 4 if not). An hg
object (hg/file@1, hg/tree@1) must also be well formed: a tree with an entry
named "..", for one, is refused.`,
		Args: rangeArgs(0, 1, "at most one FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var in io.Reader = g.ui.stdin
			if len(args) == 1 && args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			// DAG-JSON of a block at the size limit takes at most four
			// times its bytes (base64, escapes); more is refused as such,
			// not parsed cut short.
			const maxInput = cas.MaxBlockSize * 4
			raw, err := io.ReadAll(io.LimitReader(in, maxInput+1))
			if err != nil {
				return err
			}
			if len(raw) > maxInput {
				return fmt.Errorf("input of more than %d bytes: %w", maxInput, cas.ErrTooLarge)
			}
			var node any
			switch inputCodec {
			case "dag-json":
				node, err = cas.DecodeJSON(raw)
			case "dag-cbor":
				node, err = cas.DecodeNode(raw)
			default:
				return usageError{fmt.Errorf("--input-codec %q: want dag-json or dag-cbor", inputCodec)}
			}
			if err != nil {
				return err
			}
			data, err := cas.EncodeNode(node)
			if err != nil {
				return err
			}
			if len(data) > cas.MaxBlockSize {
				return fmt.Errorf("block of %d bytes: %w", len(data), cas.ErrTooLarge)
			}
			if err := cas.CheckObject(data); err != nil {
				return err
			}
			b := cas.NewBlock(cas.DagCBOR, data)
			if pin != "" {
				if err := cas.CheckPinName(pin); err != nil {
					return usageError{err}
				}
			}
			return g.withStore(false, func(st cas.Store) error {
				if err := st.Put(cmd.Context(), b); err != nil {
					return err
				}
				if pin != "" {
					// As for hg pin add: never a pin to a partial object.
					if err := cas.CheckClosure(cmd.Context(), st, b.CID()); err != nil {
						return fmt.Errorf("stored %s, not pinned: %w", b.CID(), err)
					}
					if err := setPin(cmd.Context(), st, pin, b.CID(), force); err != nil {
						return fmt.Errorf("stored %s, not pinned: %w", b.CID(), err)
					}
				}
				g.ui.printf("%s\n", b.CID())
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&inputCodec, "input-codec", "dag-json", "the input format: dag-json or dag-cbor")
	cmd.Flags().StringVar(&pin, "pin", "", "pin the block under `NAME`")
	cmd.Flags().BoolVarP(&force, "force", "f", false, "with --pin, move the pin if it names another root")
	return cmd
}

func newBlockCmd(g *globals) *cobra.Command {
	return groupCmd("block", "read and write single blocks as opaque bytes", newBlockGetCmd(g), newBlockPutCmd(g))
}

func newBlockGetCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "get CID|PIN",
		Short: "write a block's verified bytes to stdout",
		Args:  exactArgs(1, "one CID or pin name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withStore(true, func(st cas.Store) error {
				c, err := resolve(cmd.Context(), st, args[0])
				if err != nil {
					return err
				}
				return st.View(cmd.Context(), c, func(data []byte) error {
					_, err := g.ui.stdout.Write(data)
					return err
				})
			})
		},
	}
}

func newBlockPutCmd(g *globals) *cobra.Command {
	var codec string
	cmd := &cobra.Command{
		Use:   "put [FILE|-]",
		Short: "store bytes as one block of the given codec, unchecked beyond its hash; print its CID",
		Long: `Store the bytes of FILE or standard input as one block under a CIDv1 of
the given codec (raw or dag-cbor). The bytes are kept as they are: a DAG-CBOR
block from another tool need not be canonical to be stored and moved, but hg
refuses to read one as its own object unless it is.`,
		Args: rangeArgs(0, 1, "at most one FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var code uint64
			switch codec {
			case "raw":
				code = cas.Raw
			case "dag-cbor":
				code = cas.DagCBOR
			default:
				return usageError{fmt.Errorf("--codec %q: want raw or dag-cbor", codec)}
			}
			var in io.Reader = g.ui.stdin
			if len(args) == 1 && args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			data, err := io.ReadAll(io.LimitReader(in, cas.MaxBlockSize+1))
			if err != nil {
				return err
			}
			if len(data) > cas.MaxBlockSize {
				return fmt.Errorf("input over %d bytes: %w (use 'hg put' for files)", cas.MaxBlockSize, cas.ErrTooLarge)
			}
			return g.withStore(false, func(st cas.Store) error {
				b := cas.NewBlock(code, data)
				if err := st.Put(cmd.Context(), b); err != nil {
					return err
				}
				g.ui.printf("%s\n", b.CID())
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&codec, "codec", "raw", "the block's codec: raw or dag-cbor")
	return cmd
}
