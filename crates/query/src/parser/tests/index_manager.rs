//! The statements the SDKs' query index managers send (QUERY.md §3), with their exact layouts: the C++ core's
//! (Python SDK 4.6) and gocb's.

use super::*;

const PYTHON: &[&str] = &[
    "CREATE PRIMARY INDEX  ON default:`b` USING GSI ",
    "CREATE PRIMARY INDEX `namedPrimary` ON default:`b`.`test-scope`.`test-collection` USING GSI WITH {\"defer_build\":true,\"num_replica\":1}",
    "CREATE INDEX `ix2` ON default:`b`(`fld1`, `fld2`)  USING GSI ",
    "CREATE INDEX `ix2` ON default:`b`.`s`.`c`(`fld1`, `fld2`) WHERE ((`fld1` = 1) and (`fld2` = 2)) USING GSI WITH {\"defer_build\":true}",
    "CREATE INDEX idx_fld1 ON `default`(fld1) PARTITION BY HASH(fld1)",
    "DROP PRIMARY INDEX ON default:`b`",
    "DROP PRIMARY INDEX ON default:`b` USING GSI",
    "DROP INDEX `namedPrimary` ON default:`b`.`test-scope`.`test-collection`",
    "DROP INDEX `ix2` ON default:`b`.`s`.`c` USING GSI",
    "DROP INDEX `b`.`ix2`",
    "DROP INDEX `b`.`ix2` USING GSI",
    "SELECT `idx`.* FROM system:indexes AS idx WHERE (bucket_id = $bucket_name OR (bucket_id IS MISSING AND keyspace_id = $bucket_name)) AND `using` = \"gsi\" ORDER BY is_primary DESC, name ASC",
    "SELECT `idx`.* FROM system:indexes AS idx WHERE (((bucket_id = $bucket_name AND scope_id = $scope_name) AND keyspace_id = $collection_name) OR (bucket_id IS MISSING AND keyspace_id = $bucket_name)) AND `using` = \"gsi\" ORDER BY is_primary DESC, name ASC",
    "SELECT `idx`.* FROM system:indexes AS idx WHERE ((bucket_id = $bucket_name AND scope_id = $scope_name) AND keyspace_id = $collection_name) AND `using` = \"gsi\" ORDER BY is_primary DESC, name ASC",
    "SELECT RAW name FROM system:indexes WHERE (bucket_id = $bucket_name OR (bucket_id IS MISSING AND keyspace_id = $bucket_name)) AND state = \"deferred\" AND `using` = \"gsi\"",
    "SELECT RAW name FROM system:indexes WHERE (bucket_id = $bucket_name OR (bucket_id IS MISSING AND keyspace_id = $bucket_name)) AND state = \"deferred\" AND `using` = \"gsi\" ORDER BY is_primary DESC, name ASC",
    "BUILD INDEX ON default:`b` (`ix0`,`ix1`,`#primary`)",
    "BUILD INDEX ON default:`b`.`s`.`c` (`ix0`)",
    "SELECT * FROM default:`b`.`s`.`c` LIMIT 1",
    "SELECT fld1, fld2 FROM default:`b` WHERE fld1=1 AND fld2=2 LIMIT 1",
];

const GO: &[&str] = &[
    "CREATE PRIMARY INDEX ON `b`",
    "CREATE PRIMARY INDEX `p` ON `b`.`s`.`c` WITH {\"defer_build\":true,\"num_replica\":1}",
    "CREATE INDEX `ix` ON `b` (`f1`, `f2`) WITH {\"defer_build\":true}",
    "DROP PRIMARY INDEX ON `b`",
    "DROP INDEX `b`.`ix`",
    "DROP INDEX `ix` ON `b`.`s`.`c`",
    "SELECT `idx`.* FROM system:indexes AS idx WHERE (bucket_id = $bucketName OR (bucket_id IS MISSING AND keyspace_id = $bucketName)) AND `using` = \"gsi\" ORDER BY is_primary DESC, name ASC",
    "SELECT `idx`.* FROM system:indexes AS idx WHERE ((bucket_id=$bucketName AND scope_id=$scopeName AND keyspace_id=$collectionName) OR (bucket_id IS MISSING and keyspace_id=$bucketName))  AND `using` = \"gsi\" ORDER BY is_primary DESC, name ASC",
    "SELECT RAW name from system:indexes WHERE (keyspace_id = $bucketName AND bucket_id IS MISSING) AND state = \"deferred\"",
    "SELECT RAW name from system:indexes WHERE bucket_id = $bucketName AND scope_id = $scopeName AND keyspace_id = $collectionName AND state = \"deferred\"",
    "BUILD INDEX ON `b`(`ix1`, `ix2`)",
];

#[test]
fn every_index_manager_statement_parses_and_prints_back() {
    // Proves each statement the C++ core and gocb send for index management parses, and that its printed form
    // parses to the same tree.
    for text in PYTHON.iter().chain(GO) {
        let parsed = stmt(text);
        let printed = parsed.to_string();
        assert_eq!(parse(&printed).as_ref(), Ok(&parsed), "{text}\n{printed}");
    }
}

#[test]
fn get_all_reads_system_indexes_with_the_idx_alias() {
    // Proves the get-all query's shape: `idx`.* from system:indexes AS idx, ordered by is_primary then name.
    let q = select(PYTHON[12]);
    let SetExpr::Query(sub) = &q.body else { panic!() };
    assert_eq!(sub.projection.terms, vec![ResultTerm::ExprStar(id("idx"))]);
    assert_eq!(sub.from, Some(keyspace(Some("system"), &["indexes"], Some("idx"))));
    assert_eq!(
        q.order_by.iter().map(|t| (t.expr.clone(), t.desc)).collect::<Vec<_>>(),
        vec![(id("is_primary"), true), (id("name"), false)]
    );
    let where_ = sub.where_.clone().expect("WHERE");
    assert_eq!(
        where_.to_string(),
        "(((((`bucket_id` = $bucket_name) and (`scope_id` = $scope_name)) and (`keyspace_id` = $collection_name)) \
         or ((`bucket_id` is missing) and (`keyspace_id` = $bucket_name))) and (`using` = \"gsi\"))"
    );
}

#[test]
fn the_condition_the_python_test_creates_prints_back_verbatim() {
    // Proves test_create_secondary_indexes_condition: the WHERE text given at CREATE comes back identical in
    // Couchbase's normalised form, and the partition key of test_index_partition_info prints as `fld1`.
    let Statement::CreateIndex(c) = stmt(PYTHON[3]) else { panic!() };
    assert_eq!(c.where_.expect("WHERE").to_string(), "((`fld1` = 1) and (`fld2` = 2))");
    assert_eq!(c.keys.iter().map(|k| k.to_string()).collect::<Vec<_>>(), vec!["`fld1`", "`fld2`"]);
    let Statement::CreateIndex(c) = stmt(PYTHON[4]) else { panic!() };
    let partition = c.partition.expect("PARTITION");
    assert_eq!(format!("HASH({})", partition[0]), "HASH(`fld1`)");
    assert_eq!(c.keyspace, path(None, &["default"]));
}

#[test]
fn legacy_drop_and_build_name_the_bucket() {
    // Proves `DROP INDEX `b`.`ix`` names bucket b and BUILD INDEX lists the names as strings.
    let Statement::DropIndex(d) = stmt(GO[4]) else { panic!() };
    assert_eq!((d.name.as_str(), d.keyspace), ("ix", path(None, &["b"])));
    let Statement::BuildIndexes(b) = stmt(PYTHON[16]) else { panic!() };
    assert_eq!(b.names, vec![s("ix0"), s("ix1"), s("#primary")]);
}

#[test]
fn gocbs_half_given_path_is_a_syntax_error() {
    // Proves gocb's malformed keyspace for a scope without a collection (an unclosed backtick) fails with 3000.
    // The open backtick swallows ` (` into the name, so the error comes at `f1`.
    assert!(err("CREATE INDEX `ix` ON `b`.`s`.`_default (`f1`)").contains("at: f1"));
    assert!(err("DROP INDEX `ix` ON `b`.`_default`.`c").contains("missing closing quote"));
}
