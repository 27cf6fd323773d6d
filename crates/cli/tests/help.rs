//! Every command that talks to a gateway takes the same pair of
//! credentials and says so in its `--help`: `--admin-token`
//! (`SLUICE_ADMIN_TOKEN`), `--api-key` (`SLUICE_API_KEY`) where a tenant
//! may use it, `--target` (`SLUICE_TARGET`), and `--json`.

use std::process::Command;

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .arg("--help")
        .output()
        .expect("sluice runs");
    assert!(out.status.success(), "{args:?} --help failed");
    String::from_utf8(out.stdout).expect("help is text")
}

#[test]
fn every_gateway_command_names_its_environment_variables() {
    // (command, a tenant may use it)
    let commands: &[(&[&str], bool)] = &[
        (&["jobs"], true),
        (&["usage"], true),
        (&["requests"], true),
        (&["keys"], false),
        (&["tenants"], false),
        (&["tiers"], false),
        (&["audit"], false),
        (&["top"], false),
    ];
    for (command, tenant) in commands {
        let text = help(command);
        for want in [
            "--target",
            "SLUICE_TARGET",
            "--admin-token",
            "SLUICE_ADMIN_TOKEN",
            "--json",
        ] {
            assert!(
                text.contains(want),
                "sluice {command:?} --help lacks {want}:\n{text}"
            );
        }
        if *tenant {
            for want in ["--api-key", "SLUICE_API_KEY"] {
                assert!(
                    text.contains(want),
                    "sluice {command:?} --help lacks {want}:\n{text}"
                );
            }
        }
    }
    // The commands that read a config say where it comes from.
    for command in [&["serve"][..], &["prices", "show"]] {
        assert!(help(command).contains("SLUICE_CONFIG"), "{command:?}");
    }
    // The gateway says how its logs are set.
    let serve = help(&["serve"]);
    for want in ["SLUICE_LOG", "SLUICE_LOG_FORMAT"] {
        assert!(serve.contains(want), "serve --help lacks {want}:\n{serve}");
    }
}
