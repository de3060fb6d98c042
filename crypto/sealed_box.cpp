// Placeholder: crypto/sealed_box.{hpp,cpp} (AES-256-GCM sealing of credential secrets) replace this file.
