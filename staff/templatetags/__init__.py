"""Template tags of the staff pages (Django's layout): ``staff_tags``."""
