//! `<clock>` and its timers.

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

/// `<clock offset='utc'>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Clock {
    /// `utc`, `timezone`, `localtime`, `variable`.
    #[serde(rename = "@offset")]
    pub offset: String,
    /// Time zone name when `offset='timezone'`.
    #[serde(rename = "@timezone")]
    pub timezone: Option<String>,
    /// Seconds, or `reset`.
    #[serde(rename = "@adjustment")]
    pub adjustment: Option<String>,
    /// Timers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timer: Vec<Timer>,
}

/// `<timer name='rtc' tickpolicy='catchup' present='yes'/>`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Timer {
    /// `rtc`, `pit`, `hpet`, `kvmclock`, `hypervclock`, `tsc`.
    #[serde(rename = "@name")]
    pub name: String,
    /// `delay`, `catchup`, `merge`, `discard`.
    #[serde(rename = "@tickpolicy")]
    pub tickpolicy: Option<String>,
    /// `yes` / `no`.
    #[serde(rename = "@present")]
    pub present: Option<String>,
    /// `guest`, `wall`, `realtime` (rtc only).
    #[serde(rename = "@track")]
    pub track: Option<String>,
    /// Frequency in Hz (`tsc` only).
    #[serde(rename = "@frequency", default)]
    pub frequency: Option<u64>,
}
