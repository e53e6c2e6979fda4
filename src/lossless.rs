//! An `f64` that survives JSON whole: a finite number (−0 included) is written as a number,
//! NaN and ±infinity, which JSON has no number for (serde_json writes them as `null`, and
//! reading `null` back fails), as the strings `"NaN"`, `"inf"` and `"-inf"`. Use with
//! `#[serde(with = "crate::lossless")]`.

use serde::{Deserialize, Deserializer, Serializer};

pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.is_nan() {
        s.serialize_str("NaN")
    } else if *v == f64::INFINITY {
        s.serialize_str("inf")
    } else if *v == f64::NEG_INFINITY {
        s.serialize_str("-inf")
    } else {
        s.serialize_f64(*v)
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Wire {
    Number(f64),
    Text(String),
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    match Wire::deserialize(d)? {
        Wire::Number(v) => Ok(v),
        Wire::Text(t) => match t.as_str() {
            "NaN" => Ok(f64::NAN),
            "inf" => Ok(f64::INFINITY),
            "-inf" => Ok(f64::NEG_INFINITY),
            other => Err(serde::de::Error::custom(format!(
                "'{other}' is not a number (expected a number, \"NaN\", \"inf\" or \"-inf\")"
            ))),
        },
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, Debug)]
    struct V(#[serde(with = "super")] f64);

    #[test]
    fn every_value_round_trips_through_json() {
        for v in [
            0.0,
            -0.0,
            1.5,
            -3.0,
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ] {
            let text = serde_json::to_string(&V(v)).unwrap();
            let back: V = serde_json::from_str(&text).unwrap();
            if v.is_nan() {
                assert!(back.0.is_nan(), "{text}");
            } else {
                assert_eq!(back.0.to_bits(), v.to_bits(), "{v} -> {text} -> {}", back.0);
            }
        }
        assert!(
            serde_json::from_str::<V>("\"lots\"")
                .unwrap_err()
                .to_string()
                .contains("'lots' is not a number")
        );
        assert!(serde_json::from_str::<V>("null").is_err());
    }
}
