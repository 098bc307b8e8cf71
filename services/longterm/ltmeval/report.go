package ltmeval

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// PrintTable writes rep as tables: per user and checkpoint, the context
// size and the superseded values still stated, then the figures per
// memory type.
func PrintTable(w io.Writer, rep *Report) error {
	fmt.Fprintf(w, "Long-term memory hygiene: %d users × %d sessions of %d tokens, provider %s, %.0fs\n",
		len(rep.Users), rep.SessionsPerUser, rep.TokensPerSession, rep.Provider, rep.ElapsedSeconds)
	fmt.Fprintln(w, "targets: ungrounded 0, duplicates ≤ 2 %, superseded still stated 0")
	for _, u := range rep.Users {
		fmt.Fprintf(w, "\n%s (%s, seed %d)\n", u.ID, u.Family, u.Seed)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "after\ttype\tentries\tungrounded\tduplicates\tsuperseded stated\t")
		for _, c := range u.After {
			for _, t := range c.Types {
				fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%.1f %%\t%d\t\n", c.Sessions, t.Type, t.Entries, t.Ungrounded, t.DuplicatesPercent, t.SupersededStated)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, c := range u.After {
			line := fmt.Sprintf("after %d: context %d tokens; current preferences held %d of %d; of %d superseded values %d still stated, %d beside their replacement",
				c.Sessions, c.ContextTokens, c.CurrentHeld, c.Current, c.Superseded, len(c.SupersededStated), c.BesideReplacement)
			if len(c.SupersededStated) > 0 {
				line += ": " + strings.Join(c.SupersededStated, ", ")
			}
			fmt.Fprintln(w, line)
		}
	}
	return nil
}
