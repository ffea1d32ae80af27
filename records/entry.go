package records

// Entry is a record as a log stores it: its clock (the log's sequence
// number), its id, and the record itself, verified.
type Entry struct {
	Clock  uint64
	ID     ID
	Record *Record
}
