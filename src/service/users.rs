//! Who may use a service besides its own user: `--allow-users`. The default serves the
//! service's own uid only; a system-wide service for several users is opt-in. Either way the
//! service acts only on the descriptors a client passes, so a client reaches nothing it could
//! not open itself.

use nix::unistd::{Uid, User};

/// The users a service admits, besides its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Users {
    /// Only the service's own uid (the default).
    Own,
    /// Every user (`all`).
    All,
    /// These uids (names resolved when the option is read), and the service's own.
    Listed(Vec<u32>),
}

impl Users {
    /// `all`, or a comma-separated list of user names and numeric uids.
    pub fn parse(text: &str) -> Result<Users, String> {
        if text == "all" {
            return Ok(Users::All);
        }
        let uids = text
            .split(',')
            .map(|name| {
                if let Ok(uid) = name.parse::<u32>() {
                    return Ok(uid);
                }
                match User::from_name(name) {
                    Ok(Some(user)) => Ok(user.uid.as_raw()),
                    _ => Err(format!("no such user: '{name}'")),
                }
            })
            .collect::<Result<Vec<u32>, String>>()?;
        Ok(Users::Listed(uids))
    }

    /// Whether a client of `uid` is served by a service running as `own`.
    pub fn admits(&self, uid: u32, own: u32) -> bool {
        uid == own
            || match self {
                Users::Own => false,
                Users::All => true,
                Users::Listed(uids) => uids.contains(&uid),
            }
    }

    /// Whether other users than the service's own may connect (the socket and its
    /// directory must then let them reach it).
    pub fn shared(&self) -> bool {
        *self != Users::Own
    }

    /// How many of `places` (connections saying hello, or clients served) one uid may hold:
    /// all of them on a service of one user's, a quarter where others share it.
    pub fn places_each(&self, places: usize) -> usize {
        match self {
            Users::Own => places,
            _ => (places / 4).max(1),
        }
    }

    /// Why `uid` was refused, for the client's warning.
    pub fn refusal(&self, uid: u32) -> String {
        let own = Uid::current().as_raw();
        match self {
            Users::Own => format!("uid {uid} may not use this service (it serves uid {own} only)"),
            _ => format!("uid {uid} may not use this service (see its --allow-users)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_all_names_and_uids() {
        assert_eq!(Users::parse("all"), Ok(Users::All));
        assert_eq!(
            Users::parse("root,65534"),
            Ok(Users::Listed(vec![0, 65534]))
        );
        assert!(Users::parse("root,no-such-user-here").is_err());
        assert!(Users::parse("").is_err());
    }

    #[test]
    fn the_own_uid_is_always_admitted() {
        assert!(Users::Own.admits(1000, 1000));
        assert!(!Users::Own.admits(0, 1000));
        assert!(Users::All.admits(0, 1000));
        let listed = Users::Listed(vec![7]);
        assert!(listed.admits(7, 1000) && listed.admits(1000, 1000) && !listed.admits(8, 1000));
    }
}
