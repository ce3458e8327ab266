package lab

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Down removes every namespace whose name starts with prefix-, also ones
// a crashed Up left behind and the inventory does not list, and then the
// inventory. Deleting a namespace deletes its veths (and so their peers)
// and its nftables tables, the lab's LB and fault tables included: the
// lab creates nothing in the caller's namespace. A delay fault's holder
// sees its namespace gone within a second and ends, its socket the last
// hold on the namespace (Fabric.Clear stops its own at once). Down is
// idempotent and returns every error it met, joined.
func Down(prefix string) error {
	if !prefixRE.MatchString(prefix) {
		return fmt.Errorf("lab down: prefix %q is not 1-12 lowercase letters and digits", prefix)
	}
	if err := NeedNetAdmin(); err != nil {
		return err
	}
	var errs []error
	names, err := listNS(prefix)
	if err != nil {
		errs = append(errs, err)
	}
	for _, n := range names {
		if err := deleteNS(n); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(statePath(prefix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("lab state: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("lab %s: down: %w", prefix, err)
	}
	return nil
}
