use std::path::PathBuf;

use super::*;

/// A config whose data directory is a fresh temporary one.
fn config(name: &str) -> Config {
    let dir = std::env::temp_dir().join(format!(
        "sluice-stores-{name}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    Config {
        data_dir: dir,
        ..Config::default()
    }
}

fn store(c: &Config, name: &str) -> Store {
    configured(c).into_iter().find(|s| s.name == name).unwrap()
}

fn path(s: &Store) -> PathBuf {
    match &s.location {
        StoreLocation::Sqlite(p) => p.clone(),
        StoreLocation::Postgres(_) => panic!("a file"),
    }
}

/// Writes a file that starts like a SQLite database.
fn sqlite_like(p: &std::path::Path) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let mut bytes = SQLITE_HEADER.to_vec();
    bytes.resize(4096, 0);
    std::fs::write(p, bytes).unwrap();
}

#[test]
fn a_fresh_data_directory_is_new_for_every_store() {
    let c = config("fresh");
    let names: Vec<_> = configured(&c).iter().map(|s| s.name).collect();
    assert_eq!(names, ["jobs", "ledger", "keys", "audit"]);
    for s in configured(&c) {
        assert_eq!(check(&s), Ok(FileState::New), "{}", s.name);
    }
    assert!(check_all(&c).is_ok());
}

#[test]
fn a_file_deleted_after_its_marker_was_left_is_refused_by_name() {
    let c = config("deleted");
    for s in configured(&c) {
        sqlite_like(&path(&s));
    }
    mark_all(&c);
    let keys = store(&c, "keys");
    assert!(keys.marker().unwrap().exists());
    assert_eq!(check(&keys), Ok(FileState::Present(4096)));
    std::fs::remove_file(path(&keys)).unwrap();
    let refused = check(&keys).unwrap_err();
    assert_eq!(refused.path, path(&keys));
    assert!(refused.detail.contains("keys.db is missing"), "{refused}");
    assert!(refused.detail.contains("no authentication"), "{refused}");
    assert!(refused.detail.contains("restore keys.db"), "{refused}");
    assert!(refused.detail.contains("keys.db.marker"), "{refused}");
    assert_eq!(check_all(&c).unwrap_err(), refused);
    // Deleting the marker is the way to start empty on purpose.
    std::fs::remove_file(keys.marker().unwrap()).unwrap();
    assert_eq!(check(&keys), Ok(FileState::New));
    let _ = std::fs::remove_dir_all(&c.data_dir);
}

#[test]
fn a_first_start_killed_before_the_first_page_is_created_again() {
    let c = config("creating");
    let ledger = store(&c, "ledger");
    // The first start leaves its marker, then SQLite creates the file
    // empty, and the process is killed before the first page.
    check_all(&c).unwrap();
    let creating = creating_of(&path(&ledger));
    assert!(creating.exists());
    std::fs::write(path(&ledger), b"").unwrap();
    assert_eq!(check(&ledger), Ok(FileState::New));
    check_all(&c).unwrap();
    // Once every store opened, the first start's marker goes, and an
    // empty file is refused from then on.
    for s in configured(&c) {
        sqlite_like(&path(&s));
    }
    mark_all(&c);
    assert!(!creating.exists());
    assert!(ledger.marker().unwrap().exists());
    std::fs::File::create(path(&ledger)).unwrap();
    assert!(check(&ledger).unwrap_err().detail.contains("empty"));
    let _ = std::fs::remove_dir_all(&c.data_dir);
}

#[test]
fn an_empty_file_is_refused_with_or_without_a_marker() {
    let c = config("empty");
    let jobs = store(&c, "jobs");
    std::fs::create_dir_all(&c.data_dir).unwrap();
    std::fs::write(path(&jobs), b"").unwrap();
    let refused = check(&jobs).unwrap_err();
    assert!(
        refused.detail.contains("jobs.db is empty (0 bytes)"),
        "{refused}"
    );
    assert!(
        refused
            .detail
            .contains("every job stored there would be lost"),
        "{refused}"
    );
    // Marking skips nothing that is there: a later truncation is refused too.
    sqlite_like(&path(&jobs));
    mark_all(&c);
    std::fs::File::create(path(&jobs)).unwrap();
    assert!(check(&jobs).unwrap_err().detail.contains("empty"));
    let _ = std::fs::remove_dir_all(&c.data_dir);
}

#[test]
fn a_file_that_is_not_sqlite_or_not_a_file_is_refused() {
    let c = config("notdb");
    let ledger = store(&c, "ledger");
    std::fs::create_dir_all(&c.data_dir).unwrap();
    std::fs::write(path(&ledger), b"{\"not\": \"a database\"}").unwrap();
    let refused = check(&ledger).unwrap_err();
    assert!(
        refused.detail.contains("not a SQLite database"),
        "{refused}"
    );
    std::fs::remove_file(path(&ledger)).unwrap();
    std::fs::create_dir(path(&ledger)).unwrap();
    assert!(check(&ledger).unwrap_err().detail.contains("is not a file"));
    let _ = std::fs::remove_dir_all(&c.data_dir);
}

#[test]
fn postgres_stores_are_not_files() {
    let mut c = config("pg");
    c.jobs.store = "postgres://db/jobs".into();
    for s in configured(&c) {
        assert_eq!(s.marker(), None);
        assert_eq!(check(&s), Ok(FileState::Server));
    }
}
