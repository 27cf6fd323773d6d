/* Runs a SQL script (replay.py's) statement by statement on one SQLite
 * connection, stepping every row and copying each column out with
 * sqlite3_value_dup, as sqlx does, then freeing it. A statement longer
 * than 200 bytes is prepared once and reset for its next run, as sqlx
 * keeps its prepared statements (the claim's; the completions carry their
 * batch inline, so they are prepared each time).
 *
 *   replay DB SCRIPT   -> prints the rows read on stderr
 */
#include <stdio.h>
#include <stdlib.h>
#include "sqlite3.h"
#include <string.h>
/* prepared statements kept by text, as sqlx keeps them */
static char *ctext[256]; static sqlite3_stmt *cst[256]; static int cn;


int main(int argc, char **argv) {
  if (argc != 3) { fprintf(stderr, "usage: replay DB SCRIPT\n"); return 2; }
  FILE *f = fopen(argv[2], "rb");
  if (!f) { perror(argv[2]); return 2; }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *sql = malloc(n + 1);
  if (!sql || fread(sql, 1, n, f) != (size_t)n) { fprintf(stderr, "cannot read %s\n", argv[2]); return 2; }
  sql[n] = 0;
  fclose(f);
  sqlite3 *db;
  if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, 0)) {
    fprintf(stderr, "%s\n", sqlite3_errmsg(db));
    return 1;
  }
  const char *tail = sql;
  long rows = 0;
  while (*tail) {
    sqlite3_stmt *st = 0;
    const char *start = tail;
    while (*start == ' ' || *start == '\n') start++;
    const char *end = start; int q = 0;
    while (*end && (q || *end != ';')) { if (*end == '\'') q = !q; end++; }
    if (*end == ';') end++;
    size_t len = end - start; int hit = -1;
    for (int i = 0; i < cn; i++) if (strlen(ctext[i]) == len && !memcmp(ctext[i], start, len)) { hit = i; break; }
    int cached = 0;
    if (hit >= 0) { st = cst[hit]; tail = end; cached = 1; }
    else {
      if (sqlite3_prepare_v2(db, tail, -1, &st, &tail) != SQLITE_OK) {
        fprintf(stderr, "%s\n", sqlite3_errmsg(db));
        return 1;
      }
      if (!st) continue;
      if (cn < 256 && len > 200) { ctext[cn] = strndup(start, len); cst[cn++] = st; cached = 1; }
    }
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      for (int i = 0; i < sqlite3_column_count(st); i++)
        sqlite3_value_free(sqlite3_value_dup(sqlite3_column_value(st, i)));
      rows++;
    }
    if (rc != SQLITE_DONE) { fprintf(stderr, "%s\n", sqlite3_errmsg(db)); return 1; }
    if (cached) sqlite3_reset(st); else sqlite3_finalize(st);
  }
  fprintf(stderr, "rows %ld\n", rows);
  sqlite3_close(db);
  return 0;
}
