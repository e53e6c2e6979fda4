//! The results file's one writer, rank 0's supervisor, which rank 0's worker sends its
//! document to (`events::Event::Doc`); where a document's verdict is decided.

use super::backing::verdict_line;
use super::exports::Exports;
use super::results::{ResultsDoc, Status, job_verdict};
use super::verdict::RankState;
use std::path::{Path, PathBuf};

/// The one writer of a results file: rank 0's supervisor. It takes the worker's document each
/// time the worker sends it (after every size, and at the worker's end), adds what only the
/// supervisor hears (other ranks' failures, the rank table, the job's verdict), and writes the
/// file atomically each time, so that a worker killed mid-run loses nothing it sent.
pub struct Writer {
    /// `--json`'s file (`None` when only machine-readable copies were asked for).
    path: Option<PathBuf>,
    /// `--csv` and `--prometheus`: copies written with the document, each time.
    exports: Exports,
    /// The document as last written (`None` before the first).
    doc: Option<ResultsDoc>,
    /// The last write failed (a later one that succeeds clears it).
    failing: bool,
}

impl Writer {
    /// The writer of `json` (when given) and of `exports`' files.
    pub fn new(json: Option<&Path>, exports: Exports) -> Writer {
        Writer {
            path: json.map(Path::to_path_buf),
            exports,
            doc: None,
            failing: false,
        }
    }

    /// The file a message about this writer names: `--json`'s, else the first copy's.
    pub fn path(&self) -> &Path {
        self.path
            .as_deref()
            .or_else(|| self.exports.files().next().map(|(_, p)| p))
            .unwrap_or(Path::new("-"))
    }

    /// The worker's newer document: the failures and rank table this writer added are kept
    /// (the worker cannot know them), and the verdict is the job's from every failure known.
    pub fn take(&mut self, mut doc: ResultsDoc) -> std::io::Result<()> {
        if let Some(prev) = &self.doc
            && prev.run_id == doc.run_id
        {
            merge_failures(&mut doc, prev);
        }
        self.doc = Some(doc);
        self.write()
    }

    /// The worker's document as it came over its socket. One that does not read back as a
    /// results document is not written, and counts as a failed write.
    pub fn take_json(&mut self, doc: serde_json::Value) -> Result<(), String> {
        match serde_json::from_value::<ResultsDoc>(doc) {
            Ok(doc) => self.take(doc).map_err(|e| e.to_string()),
            Err(e) => {
                self.failing = true;
                Err(format!("the worker's document does not read back: {e}"))
            }
        }
    }

    /// Changes the document and writes it; an error when the worker never sent one.
    pub fn amend(&mut self, change: impl FnOnce(&mut ResultsDoc)) -> std::io::Result<()> {
        let doc = self.doc.as_mut().ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "rank 0's worker sent no results document",
            )
        })?;
        change(doc);
        self.write()
    }

    /// The document as last taken (`None` before the first).
    pub fn doc(&self) -> Option<&ResultsDoc> {
        self.doc.as_ref()
    }

    /// Whether it writes any file (a burn-in keeps its document without one).
    pub fn has_file(&self) -> bool {
        self.path.is_some() || !self.exports.is_empty()
    }

    /// Whether the last write failed.
    pub fn failing(&self) -> bool {
        self.failing
    }

    /// The document, then its copies (each tried even when an earlier file failed).
    fn write(&mut self) -> std::io::Result<()> {
        let Some(doc) = &self.doc else { return Ok(()) };
        let json = self.path.as_deref().map_or(Ok(()), |p| save(p, doc));
        let copies = self.exports.write(doc);
        let out = json.and(copies);
        self.failing = out.is_err();
        out
    }
}

/// Adds to `doc` the failures and rank table `other` (the document as last written) has and
/// it lacks. The verdict is the job's, from every failure now known ([`job_verdict`]): a later
/// failure of a peer that only saw the culprit vanish never takes it over, and a more causal
/// one that arrives later does. A cancelled or failed verdict in the file stands over a
/// verdict without failures.
fn merge_failures(doc: &mut ResultsDoc, other: &ResultsDoc) {
    for f in &other.failures {
        if !doc.failures.contains(f) {
            doc.failures.push(f.clone());
        }
    }
    if doc.ranks.is_empty() {
        doc.ranks = other.ranks.clone();
    }
    if !decide(doc) && matches!(other.verdict.status, Status::Fail | Status::Cancelled) {
        doc.verdict = other.verdict.clone();
        agree(doc);
    }
}

/// Sets `doc`'s verdict to the job's, from every failure it holds ([`job_verdict`]), labelled
/// with the backend it ran on, and makes the rank table agree with it. `false`, and nothing
/// changed, when it holds no failure. The one place a results document's verdict is decided.
pub fn decide(doc: &mut ResultsDoc) -> bool {
    // The rank table has a row for every rank of the job (`JobView::records`), in order.
    let world = (doc.ranks.len() > 1
        && doc
            .ranks
            .iter()
            .enumerate()
            .all(|(i, r)| r.rank as usize == i))
    .then_some(doc.ranks.len() as u32);
    let Some(mut v) = job_verdict(&doc.failures, world) else {
        return false;
    };
    v.line = verdict_line(&doc.backend, &v.line);
    doc.verdict = v;
    agree(doc);
    true
}

/// Makes the rank table agree with the verdict: a rank that failed only as a consequence of
/// the verdict's ranks is marked `consequence`, not `failed`.
pub fn agree(doc: &mut ResultsDoc) {
    if doc.verdict.status != Status::Fail || doc.verdict.ranks.is_empty() {
        return;
    }
    for r in &mut doc.ranks {
        let named = doc.verdict.ranks.contains(&r.rank);
        if r.state == RankState::Failed && !named {
            r.state = RankState::Consequence;
        } else if named
            && matches!(
                r.state,
                RankState::Stopped
                    | RankState::Running
                    | RankState::Cancelled
                    | RankState::Finished
            )
        {
            // Named by another rank: it stopped answering, then the launcher stopped it; or
            // rank 0's check found the data it sent wrong, after its own process finished.
            r.state = RankState::Failed;
        }
    }
}

/// Writes `doc` to `path` atomically, never replacing anything but a regular file (see
/// [`super::atomic_file`]): [`Writer`]'s one way to the disk.
fn save(path: &Path, doc: &ResultsDoc) -> std::io::Result<()> {
    let text = serde_json::to_vec_pretty(doc).map_err(std::io::Error::other)?;
    super::atomic_file::write_atomic(path, &text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Failure;
    use crate::report::results::load;
    use crate::report::results::tests::sample_doc;
    use crate::stage::Stage;

    #[test]
    fn the_writer_keeps_what_it_added_across_the_workers_documents() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.json");
        let who = crate::error::Who {
            rank: Some(2),
            host: "h2".into(),
        };
        // An earlier run's file at the same path is replaced, not merged.
        let mut earlier = sample_doc();
        earlier.run_id = "earlier".into();
        earlier
            .failures
            .push(Failure::new(Stage::Device, &who, "from the earlier run"));
        save(&path, &earlier).unwrap();
        let mut w = Writer::new(Some(&path), Exports::default());
        assert!(
            w.amend(|_| {}).is_err(),
            "nothing to amend before a document"
        );
        w.take(sample_doc()).unwrap();
        let back = load(&path).unwrap();
        assert!(back.failures.is_empty() && back.verdict.status != Status::Fail);
        // The supervisor adds another rank's failure; the worker's next document keeps it.
        w.amend(|d| d.failures.push(Failure::new(Stage::Device, &who, "rank 2")))
            .unwrap();
        let mut newer = sample_doc();
        newer.stages.clear();
        w.take(newer).unwrap();
        let back = load(&path).unwrap();
        assert_eq!(back.failures.len(), 1);
        assert_eq!(back.verdict.status, Status::Fail);
    }

    use crate::report::verdict::tests::{REMOTE, at};

    #[test]
    fn a_later_document_lets_a_more_causal_failure_take_the_verdict() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.json");
        let mut w = Writer::new(Some(&path), Exports::default());
        w.take(sample_doc()).unwrap();
        w.amend(|d| d.failures.push(at(0, Stage::Run, REMOTE)))
            .unwrap();
        w.amend(|d| {
            d.failures
                .push(at(1, Stage::Run, "the worker died of SIGKILL"))
        })
        .unwrap();
        w.take(sample_doc()).unwrap();
        let back = load(&path).unwrap();
        assert_eq!(back.verdict.status, Status::Fail);
        assert_eq!(back.verdict.ranks, vec![1], "{}", back.verdict.line);
    }

    #[test]
    fn a_failed_write_is_said_and_a_later_one_clears_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gone").join("run.json");
        let mut w = Writer::new(Some(&path), Exports::default());
        assert!(w.take(sample_doc()).is_err() && w.failing());
        std::fs::create_dir(dir.path().join("gone")).unwrap();
        w.amend(|_| {}).unwrap();
        assert!(!w.failing() && load(&path).is_ok());
    }
}
