//! How long a rank's supervisor waits, for its worker and for the other ranks, at each turn.

use std::time::Duration;

/// The supervisor's own deadline trails the worker's, so that the worker, which can abort the
/// communicator and say more, reports first when it can.
pub(super) const GRACE: Duration = Duration::from_millis(1000);

/// The supervisor's backstop for a rank waiting on others trails the worker's own wait by this
/// much, so that the worker's verdict, in the library's words, comes first when it can; the
/// total (deadline + 1.9 s) stays within deadline + 2 s.
pub(super) const WAITING_BACKSTOP: Duration = Duration::from_millis(400);

/// How long rank 0, its job failed, waits for the other ranks' end reports before it concludes
/// (from the first failure it knows of; its own worker is stopped then if it is still running):
/// ranks that fail alike at about the same moment all reach the verdict, instead of those the
/// launcher stopped first being left out by chance.
pub(super) const GATHER: Duration = Duration::from_millis(1000);

/// How long rank 0 may stretch [`GATHER`] while a rank that shares a host with a failed one
/// is still running and heard from (see
/// [`crate::run::status::JobView::alike_pending`]): ranks of one host often fail alike (the
/// same missing interface, the same full /dev/shm), a moment apart when the host is loaded.
/// Less than [`HOLD`], so that rank 0 concludes before the first failed rank gives up on its
/// goodbye and the launcher stops the job.
pub(super) const GATHER_ALIKE: Duration = Duration::from_millis(2500);

/// How long a rank whose worker failed keeps its process for rank 0's goodbye: its exit makes
/// the launcher stop every rank, those about to report the same failure among them. Longer than
/// [`GATHER_ALIKE`], so that rank 0 concludes first when it can.
pub(super) const HOLD: Duration = Duration::from_millis(3000);

/// How long rank 0 waits, after a pass, for the other ranks' end reports.
pub(super) const SETTLE: Duration = Duration::from_secs(2);

/// How long a supervisor whose worker ended with a code not its own waits for the launcher's
/// signal (Open MPI sends SIGCONT, then SIGTERM a second later).
pub(super) const LAUNCHER_SIGNAL_WAIT: Duration = Duration::from_millis(1500);

/// How long rank 0 of a cancelled job waits for the other ranks' ends.
pub(super) const CANCEL_SETTLE: Duration = Duration::from_millis(300);

/// How long a rank whose worker failed stays before exiting (see `spawn_and_watch`).
pub(super) const LINGER: Duration = Duration::from_millis(700);

/// How long a rank that failed before the ranks first met looks for rank 0's supervisor on its
/// own host (it is started by then: the failure came after MPI_Init, which waits for every
/// rank's process, or after a deadline).
pub(super) const LOCAL_LOOKUP: Duration = Duration::from_millis(500);
