//! The log file: opened with `O_APPEND` (so several writers, or `logrotate`'s `copytruncate`,
//! never make lines overwrite each other), and reopened when it is moved or deleted, as oslo.log's
//! `WatchedFileHandler` does: before each line the path is compared with the open file (one
//! `stat`), so `logrotate` works with or without a `postrotate` SIGHUP.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use tracing_subscriber::fmt::MakeWriter;

/// An append-only log file that follows its path.
#[derive(Debug)]
pub(crate) struct LogFile {
    path: PathBuf,
    open: Mutex<OpenFile>,
}

#[derive(Debug)]
struct OpenFile {
    file: File,
    /// Device and inode of `file`: the path points elsewhere once they differ.
    id: (u64, u64),
    /// A reopen failed: said once on stderr, not at every line.
    reopen_failed: bool,
}

fn open_append(path: &Path) -> std::io::Result<OpenFile> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let meta = file.metadata()?;
    Ok(OpenFile {
        file,
        id: (meta.dev(), meta.ino()),
        reopen_failed: false,
    })
}

impl LogFile {
    pub(crate) fn open(path: PathBuf) -> std::io::Result<Self> {
        let open = open_append(&path)?;
        Ok(Self {
            path,
            open: Mutex::new(open),
        })
    }

    /// The open file, reopened first if the path no longer names it (moved, deleted,
    /// replaced). If the reopen fails (the directory is gone), lines keep going to the old file.
    fn current(&self) -> MutexGuard<'_, OpenFile> {
        // A writer that panicked mid-line leaves nothing inconsistent here: keep logging.
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let same = std::fs::metadata(&self.path)
            .map(|m| (m.dev(), m.ino()) == open.id)
            .unwrap_or(false);
        if !same {
            match open_append(&self.path) {
                Ok(new) => *open = new,
                Err(e) if !open.reopen_failed => {
                    open.reopen_failed = true;
                    eprintln!(
                        "ovn-bgp-agent: cannot reopen log file {}: {e}; logging to the old file",
                        self.path.display()
                    );
                }
                Err(_) => {}
            }
        }
        open
    }
}

impl super::LineSink for LogFile {
    /// One `write`: O_APPEND keeps the line whole among other writers.
    fn deliver(&self, _: tracing::Level, line: &[u8]) {
        let mut open = self.current();
        if let Err(e) = open.file.write_all(line) {
            eprintln!(
                "ovn-bgp-agent: cannot write to log file {}: {e}",
                self.path.display()
            );
        }
    }
}

impl<'a> MakeWriter<'a> for LogFile {
    type Writer = super::EventLine<'a, LogFile>;

    fn make_writer(&'a self) -> Self::Writer {
        super::EventLine::new(self, tracing::Level::INFO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(file: &LogFile, text: &str) {
        file.make_writer().write_all(text.as_bytes()).unwrap();
    }

    #[test]
    fn follows_the_path_after_a_move_and_a_delete() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.log");
        std::fs::write(&path, "before\n").unwrap();
        let file = LogFile::open(path.clone()).unwrap();
        line(&file, "one\n");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "before\none\n");

        std::fs::rename(&path, dir.path().join("agent.log.1")).unwrap();
        line(&file, "two\n");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two\n");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("agent.log.1")).unwrap(),
            "before\none\n"
        );

        std::fs::remove_file(&path).unwrap();
        line(&file, "three\n");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "three\n");
    }
}
