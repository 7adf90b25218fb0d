// Package join owns the flags of `bootlet join`, `join print` and `join
// finish` (bootlet-tools only: kubeadm's discovery is why); package join of
// the module root does the work.
package join
