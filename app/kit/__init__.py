"""Small shared pieces every domain may import."""
