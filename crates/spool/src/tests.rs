use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use super::*;

/// A sink in memory that can be made to fail.
#[derive(Clone, Default)]
struct Memory {
    rows: Arc<Mutex<Vec<u64>>>,
    failing: Arc<AtomicBool>,
    /// The size of each batch written.
    batches: Arc<Mutex<Vec<usize>>>,
    /// The thread that wrote each batch.
    threads: Arc<Mutex<Vec<Option<String>>>>,
}

impl Sink<u64> for Memory {
    type Error = &'static str;
    async fn write(&self, batch: &[u64]) -> Result<(), Self::Error> {
        if self.failing.load(Ordering::Relaxed) {
            return Err("down");
        }
        self.rows.lock().unwrap().extend_from_slice(batch);
        self.batches.lock().unwrap().push(batch.len());
        let thread = std::thread::current().name().map(str::to_owned);
        self.threads.lock().unwrap().push(thread);
        Ok(())
    }
}

fn temp(name: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "sluice-spool-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// A spool into memory writing `batch` records at a time, waiting up to
/// `linger` for a batch to fill.
fn batching(batch: usize, linger: Duration) -> (Memory, Spool<u64>, SpoolTask) {
    let sink = Memory::default();
    let config = SpoolConfig::new("test").batch(batch).linger(linger);
    let (spool, task) = Spool::spawn(sink.clone(), config);
    (sink, spool, task)
}

/// A spool into memory with a queue of 10, batches of 4 and a spill
/// file (its path returned).
fn spilling() -> (Memory, PathBuf, Spool<u64>, SpoolTask) {
    let sink = Memory::default();
    let spill = temp("spill.jsonl");
    let config = SpoolConfig::new("test")
        .capacity(10)
        .batch(4)
        .spill(Some(spill.clone()));
    let (spool, task) = Spool::spawn(sink.clone(), config);
    (sink, spill, spool, task)
}

fn sorted(m: &Memory) -> Vec<u64> {
    let mut v = m.rows.lock().unwrap().clone();
    v.sort_unstable();
    v
}

#[tokio::test(flavor = "current_thread")]
async fn a_full_queue_spills_and_every_record_arrives_once() {
    // The task does not run until this test awaits: the queue of 10 takes
    // the first 10, the other 90 spill.
    let (sink, spill, spool, task) = spilling();
    for n in 0..100 {
        spool.push(n);
    }
    assert_eq!((spool.spilled(), spool.lost(), spool.queued()), (90, 0, 10));
    assert!(spill.exists());
    task.shutdown().await;
    assert_eq!(sorted(&sink), (0..100).collect::<Vec<_>>());
    assert_eq!(spool.written(), 100);
    assert!(!file::exists(&spill), "written back and removed");
}

#[tokio::test(flavor = "current_thread")]
async fn records_spilled_after_a_write_back_go_to_a_fresh_file() {
    let (sink, spill, spool, task) = spilling();
    for n in 0..50 {
        spool.push(n);
    }
    assert_eq!(spool.spilled(), 40);
    // The writer takes the queue and writes the spill file back (the
    // file it appended to is then taken aside and removed).
    for _ in 0..10_000 {
        if spool.written() == 50 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(spool.written(), 50);
    assert!(!file::exists(&spill));
    // Spilled again: into a new file at the same path, not the one removed.
    for n in 50..100 {
        spool.push(n);
    }
    assert_eq!(spool.spilled(), 80);
    assert!(spill.exists());
    task.shutdown().await;
    assert_eq!(sorted(&sink), (0..100).collect::<Vec<_>>());
    assert_eq!(spool.lost(), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn a_failing_sink_spills_and_a_later_start_writes_the_file() {
    let sink = Memory::default();
    sink.failing.store(true, Ordering::Relaxed);
    let spill = temp("spill.jsonl");
    let config = SpoolConfig::new("test").spill(Some(spill.clone()));
    let (spool, task) = Spool::spawn(sink.clone(), config.clone());
    for n in 0..5 {
        spool.push(n);
    }
    task.shutdown().await;
    assert!(sink.rows.lock().unwrap().is_empty());
    assert_eq!((spool.spilled(), spool.written()), (5, 0));
    // A cut last line (a crash mid-write) is skipped, the rest is read.
    // The failed write-back at shutdown left the file taken aside.
    let taken = file::importing(&spill);
    assert!(taken.exists() && !spill.exists());
    let mut f = OpenOptions::new().append(true).open(&taken).unwrap();
    f.write_all(b"1x").unwrap();
    drop(f);
    sink.failing.store(false, Ordering::Relaxed);
    let (spool, task) = Spool::<u64>::spawn(sink.clone(), config);
    task.shutdown().await;
    assert_eq!(sorted(&sink), vec![0, 1, 2, 3, 4]);
    assert_eq!(spool.written(), 5);
}

#[tokio::test(flavor = "current_thread")]
async fn without_a_spill_file_an_overflow_is_counted_as_lost() {
    let sink = Memory::default();
    let (spool, task) = Spool::spawn(sink.clone(), SpoolConfig::new("test").capacity(2));
    for n in 0..5 {
        spool.push(n);
    }
    assert_eq!((spool.spilled(), spool.lost()), (0, 3));
    task.shutdown().await;
    assert_eq!(sorted(&sink), vec![0, 1]);
}

#[tokio::test(flavor = "current_thread")]
async fn records_pushed_after_shutdown_spill() {
    let sink = Memory::default();
    let spill = temp("spill.jsonl");
    let config = SpoolConfig::new("test").spill(Some(spill.clone()));
    let (spool, task) = Spool::spawn(sink.clone(), config);
    spool.push(1);
    task.shutdown().await;
    spool.push(2);
    assert_eq!(spool.spilled(), 1);
    assert_eq!(sorted(&sink), vec![1]);
    assert!(spill.exists(), "waits for the next start");
}

#[tokio::test(flavor = "current_thread")]
async fn a_trickle_is_written_in_full_batches_and_a_close_ends_the_wait() {
    // A linger far longer than the test: only a full batch or the close
    // can end a wait.
    let (sink, spool, task) = batching(3, Duration::from_secs(3600));
    for n in 0..4 {
        spool.push(n);
        // Lets the writer take each record as it comes.
        tokio::task::yield_now().await;
    }
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(
        *sink.batches.lock().unwrap(),
        vec![3],
        "one full batch, one record waiting"
    );
    task.shutdown().await;
    assert_eq!(*sink.batches.lock().unwrap(), vec![3, 1]);
    assert_eq!(sorted(&sink), vec![0, 1, 2, 3]);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_batch_waits_the_linger_from_its_first_record() {
    let (sink, spool, task) = batching(100, Duration::from_millis(10));
    // A record every millisecond: each batch takes what came within
    // 10 ms (the timer's tick rounds it up a little) of its first record,
    // neither one record nor all of them.
    for n in 0..25 {
        spool.push(n);
        tokio::time::advance(Duration::from_millis(1)).await;
    }
    tokio::time::advance(Duration::from_millis(20)).await;
    let batches = sink.batches.lock().unwrap().clone();
    assert!(batches.len() >= 2, "{batches:?}");
    assert!(
        batches.iter().all(|&b| (9..=13).contains(&b)),
        "{batches:?}"
    );
    task.shutdown().await;
    assert_eq!(sorted(&sink), (0..25).collect::<Vec<_>>());
}

#[tokio::test(flavor = "current_thread")]
async fn a_writer_on_its_own_thread_drains_at_shutdown() {
    let sink = Memory::default();
    let config = SpoolConfig::new("test").batch(7).thread("spool-test");
    let (spool, task) = Spool::spawn(sink.clone(), config);
    for n in 0..100 {
        spool.push(n);
    }
    task.shutdown().await;
    assert_eq!(sorted(&sink), (0..100).collect::<Vec<_>>());
    let threads = sink.threads.lock().unwrap().clone();
    assert!(
        threads.iter().all(|t| t.as_deref() == Some("spool-test")),
        "{threads:?}"
    );
    assert_eq!(
        (spool.written(), spool.spilled(), spool.lost()),
        (100, 0, 0)
    );
    spool.push(100);
    assert_eq!(spool.lost(), 1, "after shutdown, no spill file: lost");
}

/// A sink whose writes wait until it is opened (a store that stalls:
/// a lock held elsewhere, packets held).
#[derive(Clone, Default)]
struct Stalling {
    rows: Arc<Mutex<Vec<u64>>>,
    open: Arc<AtomicBool>,
}

impl Sink<u64> for Stalling {
    type Error = &'static str;
    async fn write(&self, batch: &[u64]) -> Result<(), Self::Error> {
        while !self.open.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.rows.lock().unwrap().extend_from_slice(batch);
        Ok(())
    }
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |s| s.lines().count())
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_stalled_sink_spills_its_batch_and_queue_once_the_bound_passes() {
    let sink = Stalling::default();
    let spill = temp("spill.jsonl");
    let config = SpoolConfig::new("test")
        .capacity(100)
        .batch(4)
        .spill(Some(spill.clone()));
    let (spool, task) = Spool::spawn(sink.clone(), config);
    for n in 0..10 {
        spool.push(n);
    }
    // The writer takes a batch of 4 and waits on the store; 6 wait in the
    // queue, far from full.
    tokio::time::sleep(DEFAULT_STALL * 9 / 10).await;
    assert_eq!((spool.spilled(), spool.queued()), (0, 6), "not yet a stall");
    // Past the bound (and the guard's look, a quarter of it): the batch
    // and the queue are on disk.
    tokio::time::sleep(DEFAULT_STALL * 2 / 5).await;
    assert_eq!((spool.spilled(), spool.queued()), (10, 0));
    assert_eq!(lines(&spill), 10);
    // Until the store answers, the queue follows at every look.
    spool.push(10);
    assert_eq!((spool.spilled(), spool.queued()), (10, 1));
    tokio::time::sleep(DEFAULT_STALL / 4).await;
    assert_eq!(
        (spool.spilled(), spool.queued(), lines(&spill)),
        (11, 0, 11)
    );
    sink.open.store(true, Ordering::Relaxed);
    tokio::time::sleep(DEFAULT_STALL).await;
    // Answering again: records are queued again.
    spool.push(11);
    assert_eq!(spool.spilled(), 11);
    task.shutdown().await;
    // Every record arrived; the batch of 4 twice (its write went through,
    // and it was in the file): only an idempotent sink stores it once.
    let mut rows = sorted_rows(&sink.rows);
    assert_eq!(rows.len(), 12 + 4);
    rows.dedup();
    assert_eq!(rows, (0..12).collect::<Vec<_>>());
    assert_eq!(spool.lost(), 0);
    assert!(!file::exists(&spill));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn without_a_stall_bound_only_a_full_queue_spills() {
    let sink = Stalling::default();
    let spill = temp("spill.jsonl");
    let config = SpoolConfig::new("test")
        .capacity(100)
        .batch(4)
        .stall(None)
        .spill(Some(spill.clone()));
    let (spool, task) = Spool::spawn(sink.clone(), config);
    for n in 0..10 {
        spool.push(n);
    }
    tokio::time::sleep(DEFAULT_STALL * 10).await;
    assert_eq!((spool.spilled(), spool.queued()), (0, 6));
    sink.open.store(true, Ordering::Relaxed);
    task.shutdown().await;
    assert_eq!(sorted_rows(&sink.rows), (0..10).collect::<Vec<_>>());
}

fn sorted_rows(rows: &Mutex<Vec<u64>>) -> Vec<u64> {
    let mut v = rows.lock().unwrap().clone();
    v.sort_unstable();
    v
}

/// A sink that takes `left` batches, then fails.
#[derive(Clone, Default)]
struct Flaky {
    rows: Arc<Mutex<Vec<u64>>>,
    left: Arc<Mutex<usize>>,
}

impl Sink<u64> for Flaky {
    type Error = &'static str;
    async fn write(&self, batch: &[u64]) -> Result<(), Self::Error> {
        let mut left = self.left.lock().unwrap();
        if *left == 0 {
            return Err("down");
        }
        *left -= 1;
        self.rows.lock().unwrap().extend_from_slice(batch);
        Ok(())
    }
}

/// A spill file of `0..n`, one JSON line each.
fn spill_file(n: u64) -> PathBuf {
    let spill = temp("spill.jsonl");
    let text: String = (0..n).map(|i| format!("{i}\n")).collect();
    std::fs::write(&spill, text).unwrap();
    spill
}

#[tokio::test(flavor = "current_thread")]
async fn a_replay_cut_short_resumes_at_its_cursor_without_repeating() {
    let spill = spill_file(100);
    let sink = Flaky::default();
    *sink.left.lock().unwrap() = 3;
    let config = SpoolConfig::new("test")
        .batch(10)
        .spill(Some(spill.clone()));
    let (spool, task) = Spool::<u64>::spawn(sink.clone(), config.clone());
    task.shutdown().await;
    // Three batches taken, the fourth refused: the rest waits.
    assert_eq!(spool.written(), 30);
    let taken = file::importing(&spill);
    assert!(taken.exists());
    assert_eq!(
        std::fs::read_to_string(replay::cursor(&taken)).unwrap(),
        "80",
        "the cursor is past the three batches' bytes"
    );
    // The next start writes the rest, and only the rest.
    *sink.left.lock().unwrap() = usize::MAX;
    let (spool, task) = Spool::<u64>::spawn(sink.clone(), config);
    task.shutdown().await;
    assert_eq!(spool.written(), 70);
    assert_eq!(
        *sink.rows.lock().unwrap(),
        (0..100).collect::<Vec<_>>(),
        "every record once, in order"
    );
    assert!(!file::exists(&spill) && !replay::cursor(&taken).exists());
}

#[tokio::test(flavor = "current_thread")]
async fn a_crash_between_a_batch_and_its_cursor_repeats_that_batch_only() {
    // As a crash leaves it: the file taken aside, a cursor at a line's
    // start (the batches before it stored), and a newer spill file.
    let spill = spill_file(0);
    let taken = file::importing(&spill);
    std::fs::write(
        &taken,
        (0..50).map(|i| format!("{i}\n")).collect::<String>(),
    )
    .unwrap();
    let at = (0..20).map(|i: u64| i.to_string().len() + 1).sum::<usize>();
    std::fs::write(replay::cursor(&taken), at.to_string()).unwrap();
    std::fs::write(&spill, "50\n51\n").unwrap();
    let sink = Flaky::default();
    *sink.left.lock().unwrap() = usize::MAX;
    let config = SpoolConfig::new("test").batch(8).spill(Some(spill.clone()));
    let (spool, task) = Spool::<u64>::spawn(sink.clone(), config);
    task.shutdown().await;
    // Both files, from the cursor on: 20..52.
    assert_eq!(*sink.rows.lock().unwrap(), (20..52).collect::<Vec<_>>());
    assert_eq!(spool.written(), 32);
    assert!(!file::exists(&spill));
}

#[test]
fn a_spill_after_a_cut_line_starts_a_line_of_its_own() {
    let spill = temp("spill.jsonl");
    std::fs::write(&spill, "1\n2\n{\"cut").unwrap();
    let mut open = None;
    file::append(&mut open, &spill, &[3u64, 4]).unwrap();
    assert_eq!(
        std::fs::read_to_string(&spill).unwrap(),
        "1\n2\n{\"cut\n3\n4\n"
    );
}
