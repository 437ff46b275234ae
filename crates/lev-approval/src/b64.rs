use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

const LENIENT: GeneralPurposeConfig = GeneralPurposeConfig::new()
    .with_encode_padding(true)
    .with_decode_padding_mode(DecodePaddingMode::Indifferent);
const STANDARD_LENIENT: GeneralPurpose = GeneralPurpose::new(&alphabet::STANDARD, LENIENT);
const URL_SAFE_LENIENT: GeneralPurpose = GeneralPurpose::new(&alphabet::URL_SAFE, LENIENT);

/// Decode base64 written in the standard or the URL-safe alphabet, padded or not.
///
/// # Errors
/// When the text is base64 in neither alphabet.
pub fn decode_base64(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    STANDARD_LENIENT
        .decode(text)
        .or_else(|_| URL_SAFE_LENIENT.decode(text))
}

/// Standard base64 with padding: what lev writes in envelopes.
pub fn encode_base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Base64url without padding: public keys and nonces.
pub fn encode_base64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_alphabet_and_padding() {
        let bytes = [0xfb_u8, 0xff, 0xbf, 0x01];
        for text in ["+/+/AQ==", "+/+/AQ", "-_-_AQ==", "-_-_AQ"] {
            assert_eq!(decode_base64(text).unwrap(), bytes, "{text}");
        }
        assert!(decode_base64("not base64!").is_err());
        assert_eq!(encode_base64(&bytes), "+/+/AQ==");
        assert_eq!(encode_base64url(&bytes), "-_-_AQ");
    }
}
