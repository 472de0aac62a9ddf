//! String-valued VMI fields as Rust enums.
//!
//! KubeVirt types these fields as Go strings with a few named values
//! (`type StartStrategy string`). Its decoder accepts any string and leaves
//! unknown ones to admission or to the converter, which refuses them by
//! field; so do these enums: every named value is a variant, any other
//! string (the empty one included) is kept as written in `Other`, and
//! serialisation writes back exactly the string that was read. Code that
//! branches on a value matches on the variants; an `Other` is refused where
//! KubeVirt refuses it, with the field-named error it had as a string.

/// Declares a string-valued enum: `Name { Variant = "value", ... }` plus
/// `Other(String)` for any other string (never one of the named values:
/// [`From<String>`] maps those to their variant). Generates `as_str`,
/// `NAMES`, `choices`, `From<&str>`/`From<String>`, `Display`, `Serialize`/
/// `Deserialize` as a JSON string and, with the `arbitrary` feature,
/// `Arbitrary` that picks named values most of the time.
macro_rules! string_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// Any other string, as written (KubeVirt's decoder keeps it;
            /// admission or the converter refuses it by field).
            Other(String),
        }

        impl $name {
            /// The named values, in KubeVirt's spelling.
            pub const NAMES: &'static [&'static str] = &[$($text),+];

            /// The named values other than the empty one, joined by `, `
            /// (for messages).
            pub fn choices() -> String {
                $name::NAMES
                    .iter()
                    .copied()
                    .filter(|n| !n.is_empty())
                    .collect::<Vec<_>>()
                    .join(", ")
            }

            /// The value as KubeVirt spells it (an `Other` as written).
            pub fn as_str(&self) -> &str {
                match self {
                    $( $name::$variant => $text, )+
                    $name::Other(s) => s,
                }
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                match s {
                    $( $text => $name::$variant, )+
                    other => $name::Other(other.to_owned()),
                }
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                match s.as_str() {
                    $( $text => $name::$variant, )+
                    _ => $name::Other(s),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                String::deserialize(d).map($name::from)
            }
        }

        #[cfg(feature = "arbitrary")]
        impl<'a> arbitrary::Arbitrary<'a> for $name {
            fn arbitrary(u: &mut arbitrary::Unstructured<'a>) -> arbitrary::Result<Self> {
                let i = u.int_in_range(0..=$name::NAMES.len())?;
                Ok(match $name::NAMES.get(i) {
                    Some(s) => $name::from(*s),
                    None => $name::from(<String as arbitrary::Arbitrary>::arbitrary(u)?),
                })
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use crate::vmi::{
        CpuFeaturePolicy, HostDiskType, InputBus, InputType, InterfaceModel, InterfaceState,
        IoThreadsPolicy, SoundModel, StartStrategy, TickPolicy, TimerTrack, Tray, VideoType,
        WatchdogAction,
    };

    /// Decodes `text`, checks the variant's spelling and that it encodes
    /// back to the same string.
    fn round_trip<T>(text: &str) -> T
    where
        T: serde::de::DeserializeOwned + serde::Serialize + std::fmt::Display,
    {
        let v: T = serde_json::from_value(json!(text)).unwrap();
        assert_eq!(v.to_string(), text);
        assert_eq!(serde_json::to_value(&v).unwrap(), json!(text));
        v
    }

    #[test]
    fn named_values_decode_to_their_variant_and_back() {
        assert_eq!(round_trip::<StartStrategy>("Paused"), StartStrategy::Paused);
        assert_eq!(
            round_trip::<IoThreadsPolicy>("supplementalPool"),
            IoThreadsPolicy::SupplementalPool
        );
        assert_eq!(
            round_trip::<InterfaceState>("absent"),
            InterfaceState::Absent
        );
        assert_eq!(
            round_trip::<InterfaceModel>("ne2k_pci"),
            InterfaceModel::Ne2kPci
        );
        assert_eq!(round_trip::<Tray>("closed"), Tray::Closed);
        assert_eq!(round_trip::<TickPolicy>("catchup"), TickPolicy::Catchup);
        assert_eq!(round_trip::<TimerTrack>("wall"), TimerTrack::Wall);
        assert_eq!(
            round_trip::<CpuFeaturePolicy>("forbid"),
            CpuFeaturePolicy::Forbid
        );
        assert_eq!(
            round_trip::<WatchdogAction>("poweroff"),
            WatchdogAction::Poweroff
        );
        assert_eq!(round_trip::<SoundModel>("ac97"), SoundModel::Ac97);
        assert_eq!(round_trip::<VideoType>("ramfb"), VideoType::Ramfb);
        assert_eq!(round_trip::<InputBus>("virtio"), InputBus::Virtio);
        assert_eq!(round_trip::<InputType>("tablet"), InputType::Tablet);
        assert_eq!(
            round_trip::<HostDiskType>("DiskOrCreate"),
            HostDiskType::DiskOrCreate
        );
        for name in InterfaceModel::NAMES {
            assert!(!matches!(
                round_trip::<InterfaceModel>(name),
                InterfaceModel::Other(_)
            ));
        }
    }

    #[test]
    fn other_strings_are_kept_as_written_and_the_empty_one_is_unset_where_go_defaults_it() {
        assert_eq!(
            round_trip::<StartStrategy>("paused"),
            StartStrategy::Other("paused".into())
        );
        assert_eq!(
            round_trip::<InterfaceModel>(""),
            InterfaceModel::Other(String::new())
        );
        assert_eq!(round_trip::<InterfaceState>(""), InterfaceState::Unset);
        assert_eq!(round_trip::<WatchdogAction>(""), WatchdogAction::Unset);
        assert_eq!(WatchdogAction::default(), WatchdogAction::Unset);
        assert_eq!(
            round_trip::<HostDiskType>("disk"),
            HostDiskType::Other("disk".into())
        );
        // A named value given as `Other` by hand still spells itself.
        assert_eq!(Tray::from(String::from("open")), Tray::Open);
        assert_eq!(
            CpuFeaturePolicy::choices(),
            "force, require, optional, disable, forbid"
        );
    }

    #[test]
    fn a_vmi_with_unknown_values_encodes_to_what_it_was_decoded_from() {
        let doc = json!({
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "metadata": {"name": "a"},
            "spec": {
                "startStrategy": "Later",
                "domain": {
                    "ioThreadsPolicy": "many",
                    "cpu": {"cores": 0, "sockets": 0, "threads": 0, "maxSockets": 0, "model": "",
                            "features": [{"name": "vmx", "policy": "maybe"}],
                            "dedicatedCpuPlacement": false, "isolateEmulatorThread": false},
                    "devices": {
                        "disks": [{"name": "c", "cdrom": {"tray": "ajar"}}],
                        "interfaces": [{"name": "default", "model": "e100", "state": "sideways"}],
                        "inputs": [{"name": "i", "bus": "ps2", "type": "mouse"}],
                        "disableHotplug": false
                    },
                    "resources": {}
                },
                "volumes": [],
                "networks": []
            }
        });
        let vmi = crate::load::from_value(doc.clone()).unwrap();
        let back: Value = serde_json::to_value(&vmi).unwrap();
        assert_eq!(back, doc);
    }

    #[test]
    fn a_value_of_another_json_type_is_refused_by_its_path() {
        let e = crate::load::from_slice(
            b"{\"apiVersion\":\"kubevirt.io/v1\",\"kind\":\"VirtualMachineInstance\",\"metadata\":{\"name\":\"a\"},\"spec\":{\"domain\":{\"devices\":{\"interfaces\":[{\"name\":\"d\",\"state\":3}]}}}}",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("spec.domain.devices.interfaces[0].state: invalid type: integer `3`, expected a string"),
            "{e}"
        );
    }
}
