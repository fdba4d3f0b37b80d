# Loaded by the Python that runs moto_server when motoserver.Start puts this folder on
# PYTHONPATH (Python imports sitecustomize at start-up). It mends two gaps of moto 5.2.1's KMS
# that AWS does not have, and nothing else; motoserver's tests pin both gaps on moto as
# shipped, so an upgrade that fixes them says this file can go.
#
# 1. Sign ignores MessageType=DIGEST: moto hashes the 32-byte digest again (it signs
#    SHA-256(digest)), so no verifier accepts the signature. AWS signs the digest as given.
# 2. GetPublicKey answers the deprecated CustomerMasterKeySpec without KeySpec; AWS answers
#    both.
import json
import threading

try:
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import Prehashed
    from moto.kms import responses as _responses
    from moto.kms import utils as _utils
    from moto.kms.exceptions import ValidationException
except ImportError:  # not moto's interpreter: nothing to mend
    pass
else:
    _digest = threading.local()
    _stock_sign = _responses.KmsResponse.sign
    _stock_ecdsa_sign = _utils.ECDSAPrivateKey.sign
    _stock_get_public_key = _responses.KmsResponse.get_public_key

    def _sign(self):
        _digest.on = self._get_param("MessageType") == "DIGEST"
        try:
            return _stock_sign(self)
        finally:
            _digest.on = False

    def _ecdsa_sign(self, message, signing_algorithm):
        if not getattr(_digest, "on", False):
            return _stock_ecdsa_sign(self, message, signing_algorithm)
        _utils.validate_signing_algorithm(signing_algorithm, self.valid_signing_algorithms)
        algorithm = self._ECDSAPrivateKey__hash_algorithm(signing_algorithm)
        if len(message) != algorithm.digest_size:
            raise ValidationException(
                f"Digest is invalid length for algorithm {signing_algorithm}."
            )
        return self.private_key.sign(message, ec.ECDSA(Prehashed(algorithm)))

    def _get_public_key(self):
        out = json.loads(_stock_get_public_key(self))
        out.setdefault("KeySpec", out.get("CustomerMasterKeySpec"))
        return json.dumps(out)

    _responses.KmsResponse.sign = _sign
    _utils.ECDSAPrivateKey.sign = _ecdsa_sign
    _responses.KmsResponse.get_public_key = _get_public_key
