// Package checkpoint owns bootlet's on-disk checkpoint format and its
// durability: it is the durable store of pods, Secrets and ConfigMaps, each
// kept as the opaque JSON bytes the caller serialised. It must not know about
// CRI or HTTP; callers decode and encode the Kubernetes objects themselves.
//
// # Layout
//
// Given bootlet's --root-dir ROOT:
//
//	ROOT/checkpoint/                         store directory (0700), see Store.Dir
//	ROOT/checkpoint/revision                 durable revision high-water mark ("7\n")
//	ROOT/checkpoint/<kind>/<namespace>/<name>.json   one record (0600)
//	ROOT/quarantine/<kind>_<namespace>_<name>_<unixnano>.json   files Open moved aside
//
// Each record file is a small, human-readable JSON envelope whose "object"
// member is the caller's JSON embedded verbatim:
//
//	{
//	  "formatVersion": 1,
//	  "kind": "pods",
//	  "namespace": "default",
//	  "name": "web",
//	  "revision": 7,
//	  "sha256": "<hex sha256 of the object bytes>",
//	  "object": {"apiVersion":"v1","kind":"Pod",...}
//	}
//
// # Durability
//
// Put and Delete return nil only once the change is durable: Put writes a
// temporary file (.<name>.json.tmp-NNNN) in the record's directory, fsyncs
// it, renames it over the final name and fsyncs the directory (newly created
// directories are made durable by fsyncing their parent). Delete removes the
// file and fsyncs the directory. On any error the in-memory view is left as
// it was, and the store makes a best-effort attempt to put the previous file
// contents back if the failure happened after the rename/remove.
//
// Open removes leftover temporary files (torn, never-acknowledged writes),
// migrates older format versions (a legacy v0 file is the bare object JSON;
// it is wrapped in a v1 envelope and rewritten durably), and moves any
// record file that is unparsable, truncated, of an unknown format version,
// stored under the wrong path, or failing its sha256 check into the
// quarantine directory. Quarantined files are never deleted; Open reports
// them through Store.Quarantined.
//
// # Revisions
//
// Every Put is assigned the next value of a store-wide counter, recorded in
// the envelope. The counter never goes backwards across restarts: at Open it
// is the maximum of every record's revision (including quarantined files
// whose envelope could still be read) and the value in ROOT/checkpoint/revision.
// That file is only written when a revision would otherwise disappear from
// disk: before Delete removes a record whose revision is not yet covered by
// the file, and at Open when the records' maximum exceeds it. The write at
// Open is best effort, so a full or read-only disk does not keep the store
// from opening and serving its records (if Open also quarantined the file
// holding the highest revision, that revision may be handed out again after
// another restart before any write succeeds). Overwriting a
// record cannot lose the maximum, because the overwrite carries a higher
// revision. So Put costs one file write and never touches the counter file.
// A Put that fails after its rename consumes its revision (there may be a
// file carrying it); a Put that fails earlier does not. Delete does not
// assign a revision.
//
// A damaged file's revision still counts when it can be read: from the
// envelope if it parses, otherwise from its header (which precedes the
// object, so a truncated file usually keeps it). The one unrecoverable case
// is a record file holding the highest revision that is damaged so badly its
// header is gone, before any Delete or Open persisted the counter; files
// written by Put never tear, so that needs the disk itself to corrupt data.
package checkpoint
