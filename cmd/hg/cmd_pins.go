package main

import (
	"errors"
	"fmt"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/boltstore"
	"github.com/spf13/cobra"
)

func newPinCmd(g *globals) *cobra.Command {
	return groupCmd("pin", "name roots that gc keeps", newPinAddCmd(g), newPinRmCmd(g), newPinLsCmd(g))
}

func newPinAddCmd(g *globals) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "add NAME CID",
		Short: "pin CID under NAME, once every block it reaches is present (--force to move a pin)",
		Args:  exactArgs(2, "NAME and CID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := cas.CheckPinName(name); err != nil {
				return usageError{err}
			}
			return g.withStore(false, func(st cas.Store) error {
				c, err := resolve(cmd.Context(), st, args[1])
				if err != nil {
					return err
				}
				if err := cas.CheckClosure(cmd.Context(), st, c); err != nil {
					return fmt.Errorf("not pinned: %w", err)
				}
				return setPin(cmd.Context(), st, name, c, force)
			})
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "move the pin if it names another root")
	return cmd
}

func newPinRmCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "remove a pin (the blocks stay until gc)",
		Args:  exactArgs(1, "one NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withStore(false, func(st cas.Store) error {
				return st.DeletePin(cmd.Context(), args[0])
			})
		},
	}
}

func newPinLsCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "list pins: CID and name, sorted by name",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withStore(true, func(st cas.Store) error {
				pins, err := st.Pins(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					type pinJSON struct {
						Name string `json:"name"`
						CID  string `json:"cid"`
					}
					out := make([]pinJSON, len(pins))
					for i, p := range pins {
						out[i] = pinJSON{p.Name, p.CID.String()}
					}
					return g.ui.printJSON(out)
				}
				for _, p := range pins {
					g.ui.printf("%s %s\n", p.CID, p.Name)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of {name, cid}")
	return cmd
}

func newGCCmd(g *globals) *cobra.Command {
	var opts cas.GCOptions
	var asJSON bool
	var maxUnused string
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "remove every block no pin, run or memo entry reaches, and give the space back",
		Long: `Remove every block that no pin reaches. gc marks first and removes nothing
if a pinned closure is missing a block or holds a damaged one (run 'hg fsck').

Then it gives the space back: pack files with no live block go, every pack
is cut after its last live block, and while more than --max-unused of the
store is dead space, the live blocks of the packs with the most dead space
are copied into new packs and the old files removed (as restic's prune
does). Every step decides from the index itself and is safe to kill. On a
full disk, dead space is given back in place first where the system allows
it; packs that still cannot be copied are left for a later gc.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			limit, err := cas.ParseUnusedLimit(maxUnused)
			if err != nil {
				return usageError{err}
			}
			opts.Compact = &cas.CompactOptions{MaxUnused: limit}
			return g.withStore(false, func(st cas.Store) error {
				stats, err := cas.GC(cmd.Context(), st, &opts)
				if err != nil {
					return err
				}
				if asJSON {
					return g.ui.printJSON(stats)
				}
				if stats.DryRun {
					g.ui.printf("would remove %d blocks (%d bytes), kept %d\n", stats.Removed, stats.FreedBytes, stats.Kept)
					return nil
				}
				g.ui.printf("removed %d blocks (%d bytes), kept %d; %d bytes freed on disk", stats.Removed, stats.FreedBytes, stats.Kept, stats.DiskFreedBytes)
				if stats.PacksRewritten > 0 {
					g.ui.printf(" (%d packs rewritten, %d bytes copied)", stats.PacksRewritten, stats.CopiedBytes)
				}
				g.ui.printf("\n")
				if stats.Postponed > 0 {
					g.ui.warnf("%d packs were left to rewrite for want of disk space: run 'hg gc' again once there is room", stats.Postponed)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&opts.DryRun, "dry-run", "n", false, "report what would be removed, remove nothing")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the counts as JSON, bytes freed on disk among them")
	cmd.Flags().StringVar(&maxUnused, "max-unused", cas.DefaultMaxUnused.String(), "dead space to tolerate: a `LIMIT` in % of the live bytes, a size (200M), or unlimited (copy nothing)")
	return cmd
}

func newFsckCmd(g *globals) *cobra.Command {
	var asJSON, repair bool
	cmd := &cobra.Command{
		Use:   "fsck",
		Short: "check the store's database, index and packs, re-hash every block, check every pin's closure; exit 4 on damage",
		Long: `Check the store: its database file (page by page, then bbolt's own
consistency check), every index entry, every pack's counts against the
index, the sizes file and tree nodes record, every block's hash, and every
pin's closure. Every problem is listed; exit 4 if there is any.

With --repair, first rebuild the database from what can still be read of it
(the store must not be in use): every readable index entry, pin and ref is
carried into a new database, the index entries it lacks are rebuilt from
the records kept beside each pack (each one checked against the bytes it
points at), every pack's counts are set from it, pack files nothing points
into any more are set aside as .orphan, and the old database is kept beside
the new one. Then the check runs, and names what is lost: the pins whose
closures are incomplete.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var lost error
			if repair {
				rep, err := repairStore(g, asJSON)
				if err != nil {
					return err
				}
				if len(rep.Lost) > 0 || len(rep.Dropped) > 0 {
					lost = integrityError{msg: fmt.Sprintf("repair: %d parts of the database could not be read and %d entries were dropped: what they held is lost, but for the %d index entries rebuilt from the packs' sidecars", len(rep.Lost), len(rep.Dropped), rep.Recovered)}
				}
			}
			err := g.withStore(true, func(st cas.Store) error {
				rep, err := cas.Fsck(cmd.Context(), st, nil)
				if err != nil {
					return err
				}
				if asJSON {
					type badJSON struct {
						CID   string `json:"cid"`
						Error string `json:"error"`
					}
					bad := make([]badJSON, len(rep.Bad))
					for i, b := range rep.Bad {
						bad[i] = badJSON{b.CID.String(), b.Error}
					}
					invalid := make([]badJSON, len(rep.Invalid))
					for i, b := range rep.Invalid {
						invalid[i] = badJSON{b.CID.String(), b.Error}
					}
					out := struct {
						Blocks  int                `json:"blocks"`
						Bytes   int64              `json:"bytes"`
						Bad     []badJSON          `json:"bad"`
						Missing []cas.MissingIn    `json:"missing"`
						Store   []cas.StoreProblem `json:"store"`
						Invalid []badJSON          `json:"invalid"`
					}{rep.Blocks, rep.Bytes, bad, rep.Missing, rep.Store, invalid}
					if out.Missing == nil {
						out.Missing = []cas.MissingIn{}
					}
					if err := g.ui.printJSON(out); err != nil {
						return err
					}
				} else {
					for _, p := range rep.Store {
						g.ui.printf("store   %s: %s\n", p.Where, p.Error)
					}
					for _, b := range rep.Bad {
						g.ui.printf("bad     %s: %s\n", b.CID, b.Error)
					}
					for _, b := range rep.Invalid {
						g.ui.printf("size    %s: %s\n", b.CID, b.Error)
					}
					for _, m := range rep.Missing {
						g.ui.printf("missing pin %s: %s\n", m.Pin, m.Error)
					}
					g.ui.printf("checked %d blocks (%d bytes): %d bad, %d pins incomplete, %d store problems, %d bad sizes\n", rep.Blocks, rep.Bytes, len(rep.Bad), len(rep.Missing), len(rep.Store), len(rep.Invalid))
				}
				if !rep.OK() {
					return integrityError{
						msg:  fmt.Sprintf("fsck found %d bad blocks, %d incomplete pins, %d store problems and %d bad sizes", len(rep.Bad), len(rep.Missing), len(rep.Store), len(rep.Invalid)),
						hint: fsckHint(rep),
					}
				}
				return nil
			})
			if err == nil {
				err = lost
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().BoolVar(&repair, "repair", false, "rebuild the database from what can be read of it first, and say what is lost")
	return cmd
}

// repairStore rebuilds the store's database (boltstore.Repair) and says
// what it kept and what it could not.
func repairStore(g *globals, asJSON bool) (*boltstore.RepairReport, error) {
	dir, err := locateStore(g.store)
	if err != nil {
		return nil, err
	}
	timeout, err := lockWait()
	if err != nil {
		return nil, err
	}
	rep, err := boltstore.Repair(dir, timeout)
	if errors.Is(err, cas.ErrNotFound) {
		return nil, fmt.Errorf("%w at %s", errNoStore, dir)
	}
	if err != nil {
		return nil, err
	}
	if asJSON {
		return rep, g.ui.printJSON(rep)
	}
	if rep.OlderMeta {
		g.ui.printf("repair: the newest state of the database could not be read whole: the one before it was used, and the last write is lost\n")
	}
	for _, l := range rep.Lost {
		g.ui.printf("repair: lost %s\n", l)
	}
	for _, d := range rep.Dropped {
		g.ui.printf("repair: dropped %s\n", d)
	}
	for _, o := range rep.Orphaned {
		g.ui.printf("repair: set aside %s: no entry points into it\n", o)
	}
	g.ui.printf("repair: kept %d index entries, recovered %d from the packs' sidecars, %d pins, %d refs; counted %d packs; the old database is %s\n", rep.Kept, rep.Recovered, rep.Pins, rep.Refs, rep.Counts, rep.Damaged)
	return rep, nil
}

// fsckHint says what to do about what fsck found.
func fsckHint(rep *cas.FsckReport) string {
	if len(rep.Store) > 0 {
		return repairHint
	}
	return ""
}

const repairHint = "'hg fsck --repair' rebuilds the database from what can be read of it, and says what is lost"
