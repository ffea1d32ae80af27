package rules

import (
	"slices"

	"github.com/spl-dev/spl/records"
)

// ResumableStatuses are the statuses of the sessions that faces offer to
// resume: stopped short of their end (paused, failed, cancelled).
var ResumableStatuses = []string{records.StatusFailed, records.StatusPaused, records.StatusCancelled}

// Resumable reports whether a session of status, with the checkpoints
// points (oldest first, those that can be read), is one to resume: its
// status is one of ResumableStatuses and a resume of it, asking for no
// checkpoint in particular, is not refused (ResumeFrom). This is what the
// service layer hands to every face as "resumable": a failed session none
// of whose checkpoints is clean and resumable, or a paused one without a
// checkpoint, is not offered. ResumeFrom also takes up a running session
// (its process may be gone without a word), and refuses only a completed
// one.
func Resumable(status string, points []ResumePoint) bool {
	if !slices.Contains(ResumableStatuses, status) {
		return false
	}
	_, why := ResumeFrom(status, points, records.ID{})
	return why == NotRefused
}

// ResumeNeedsAll reports whether Resumable must see all of a session's
// checkpoints, not its newest alone, to decide: only for a failed session
// whose newest checkpoint (newest; ok false: none) is not clean and
// resumable, when the choice walks back to an older one. A reader of many
// sessions reads each one's newest checkpoint, and the others only then.
func ResumeNeedsAll(status string, newest ResumePoint, ok bool) bool {
	return ok && status == records.StatusFailed && !(newest.Clean && newest.Resumable)
}

// ResumePoint is a checkpoint of a session as ResumeFrom weighs it.
type ResumePoint struct {
	ID        records.ID
	Clean     bool // is_clean (absent: true)
	Resumable bool // can_resume_from (absent: true)
}

// Refusal says why ResumeFrom refuses a resume.
type Refusal int

// The refusals of ResumeFrom.
const (
	NotRefused         Refusal = iota
	RefuseCompleted            // the session is completed
	RefuseNoCheckpoint         // the thread holds no checkpoint
	RefuseNoCleanPoint         // the session failed, and none of its checkpoints is clean and resumable
	RefuseUnknownFrom          // the checkpoint asked for is not one of the session's
	RefuseNotResumable         // the checkpoint chosen says it cannot be resumed from
)

// ResumeFrom chooses the checkpoint a resume of a session of status
// takes up, among points (its checkpoints that can be read, oldest
// first): from when it is not zero; else for a failed session the newest
// that is clean and resumable, else the newest. It returns the index of
// the one chosen, and why it refuses: a completed session, no checkpoint
// to take up, a from that is not among points (each with index -1), or a
// choice whose can_resume_from is false (with the index of the choice,
// for the refusal to name it).
func ResumeFrom(status string, points []ResumePoint, from records.ID) (int, Refusal) {
	if status == records.StatusCompleted {
		return -1, RefuseCompleted
	}
	i := -1
	switch {
	case !from.IsZero():
		if i = slices.IndexFunc(points, func(p ResumePoint) bool { return p.ID == from }); i < 0 {
			return -1, RefuseUnknownFrom
		}
	case status == records.StatusFailed:
		for j := len(points) - 1; j >= 0 && i < 0; j-- {
			if points[j].Clean && points[j].Resumable {
				i = j
			}
		}
		if i < 0 {
			return -1, RefuseNoCleanPoint
		}
	case len(points) > 0:
		i = len(points) - 1
	default:
		return -1, RefuseNoCheckpoint
	}
	if !points[i].Resumable {
		return i, RefuseNotResumable
	}
	return i, NotRefused
}
